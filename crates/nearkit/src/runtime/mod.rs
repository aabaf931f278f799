//! What the backends share across capabilities: CPU helpers for parallel output, the CUDA
//! context, compiler and memory, and phase timing.

pub(crate) mod cpu;
pub(crate) mod cuda;
pub(crate) mod profile;
#[cfg(target_arch = "x86_64")]
pub(crate) mod top8;
