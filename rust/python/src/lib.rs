//! Python bindings: conversions and delegation only.

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", penguin_harness_core::VERSION)?;
    Ok(())
}
