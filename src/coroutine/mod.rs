//! Greenlets on corosensei.
//!
//! Stacks: [`acquire_stack`] hands out guard-paged [`PooledStack`]s from a
//! pool; [`stack_stats`] counts them.

pub(crate) mod stack;

pub use self::stack::{
    acquire as acquire_stack, stack_stats, PooledStack, StackStats, DEFAULT_STACK_SIZE,
};
