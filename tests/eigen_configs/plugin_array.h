// A member Eigen pastes into Array (EIGEN_ARRAY_PLUGIN).
int plugin_tag() const { return 11; }
