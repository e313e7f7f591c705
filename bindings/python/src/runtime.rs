//! The one Tokio runtime behind every blocking call.

use std::future::Future;
use std::sync::OnceLock;

use pyo3::prelude::*;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name("skillstore")
            .enable_all()
            .build()
            .expect("a Tokio runtime")
    })
}

/// Runs `future` to completion with the GIL released: other Python threads
/// run while it waits on storage or parses.
pub fn block_on<F>(py: Python<'_>, future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    py.detach(|| runtime().block_on(future))
}

/// `await`-able: runs the method `name` of `object` with these arguments
/// on the running event loop's default executor, so the loop keeps running
/// while the call (which releases the GIL) works.
pub fn in_thread<'py>(
    object: &Bound<'py, PyAny>,
    name: &str,
    args: &Bound<'py, pyo3::types::PyTuple>,
    kwargs: Option<&Bound<'py, pyo3::types::PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = object.py();
    let method = object.getattr(name)?;
    let call = py.import("functools")?.getattr("partial")?.call(
        (method,)
            .into_pyobject(py)?
            .add(args)?
            .cast_into::<pyo3::types::PyTuple>()?,
        kwargs,
    )?;
    let running = py.import("asyncio")?.call_method0("get_running_loop")?;
    running.call_method1("run_in_executor", (py.None(), call))
}

/// Defines `a<name>` coroutine-like methods forwarding to `<name>` on a
/// worker thread.
#[macro_export]
macro_rules! async_variants {
    ($ty:ty { $($async_name:ident => $name:literal),* $(,)? }) => {
        #[pyo3::pymethods]
        impl $ty {
            $(
                #[doc = concat!("`await`-able `", $name, "`, run on the event loop's executor.")]
                #[pyo3(signature = (*args, **kwargs))]
                fn $async_name<'py>(
                    slf: &pyo3::Bound<'py, Self>,
                    args: &pyo3::Bound<'py, pyo3::types::PyTuple>,
                    kwargs: Option<&pyo3::Bound<'py, pyo3::types::PyDict>>,
                ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                    $crate::runtime::in_thread(slf.as_any(), $name, args, kwargs)
                }
            )*
        }
    };
}
