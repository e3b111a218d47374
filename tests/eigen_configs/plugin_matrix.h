// A member Eigen pastes into Matrix (EIGEN_MATRIX_PLUGIN).
int plugin_tag() const { return 7; }
