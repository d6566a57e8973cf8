//! A matrix as a slice with a row and a column stride: what the products
//! of the CPU step ([`super::gemm`], [`super::dots`]) read, so that a
//! transpose is a view, never a copy.

/// A read-only matrix view: element `(i, j)` is `data[i * row + j * col]`.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row: usize,
    pub col: usize,
}

impl<'a> View<'a> {
    /// A row-major `rows x cols` matrix.
    pub(crate) fn rows(data: &'a [f32], rows: usize, cols: usize) -> View<'a> {
        View { data, rows, cols, row: cols, col: 1 }
    }

    /// Columns `from..to` of the view.
    pub(crate) fn inner(self, from: usize, to: usize) -> View<'a> {
        assert!(from <= to && to <= self.cols, "columns {from}..{to} of {}", self.cols);
        let data = if self.rows == 0 || from == to { &self.data[..0] } else { &self.data[from * self.col..] };
        View { data, cols: to - from, ..self }
    }

    pub(crate) fn t(self) -> View<'a> {
        View { data: self.data, rows: self.cols, cols: self.rows, row: self.col, col: self.row }
    }

    pub(crate) fn fits(&self) -> bool {
        self.rows == 0 || self.cols == 0 || (self.rows - 1) * self.row + (self.cols - 1) * self.col < self.data.len()
    }
}
