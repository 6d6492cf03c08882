//! Greenlets on corosensei.
