//! A model of CPython's pending calls.
