// A Matrix plugin of the program's own (EIGEN_MATRIX_PLUGIN): members that
// Eigen pastes into its Matrix class template.

/// The sum of the diagonal and of the corners: a checksum the program prints.
Scalar corner_trace() const {
  const Index r = this->rows() - 1, c = this->cols() - 1;
  return this->diagonal().sum() + this->coeff(0, 0) + this->coeff(r, 0) + this->coeff(0, c) + this->coeff(r, c);
}
