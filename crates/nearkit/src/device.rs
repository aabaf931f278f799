//! Choosing where a query runs: `auto`, `cpu` or `cuda[:N]`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::backend::Backend;
use crate::closest_point::{ClosestPointOptions, ClosestPoints};
use crate::cpu::CpuBackend;
use crate::cuda::CudaBackend;
use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::points::Points;
use crate::query::{Knn, KnnOptions, Nearest, Pair, PairsOptions};
use crate::real::Real;
use crate::shifted_sort::ShiftedSortOptions;
use crate::vectors::Vectors;

/// Where to run, as the user asks for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// CUDA when a usable GPU is there, else the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda(usize),
}

impl FromStr for Device {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda(0)),
            _ => {
                s.strip_prefix("cuda:").and_then(|n| n.parse().ok()).map(Self::Cuda).ok_or_else(|| {
                    Error::InvalidArgument(format!("unknown device '{s}': use auto, cpu, cuda or cuda:N"))
                })
            }
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// A resolved backend, ready to run queries.
#[derive(Clone)]
pub enum Engine {
    Cpu(CpuBackend),
    Cuda(Arc<CudaBackend>),
}

impl Engine {
    /// Resolves a device. `Auto` falls back to the CPU when CUDA is not usable, and
    /// `fallback_note` says why; an explicit `cuda` that is not usable is an error.
    pub fn open(device: Device) -> Result<(Engine, Option<String>)> {
        match device {
            Device::Cpu => Ok((Engine::Cpu(CpuBackend), None)),
            Device::Cuda(n) => Ok((Engine::Cuda(CudaBackend::shared(n)?), None)),
            Device::Auto => match CudaBackend::shared(0) {
                Ok(b) => Ok((Engine::Cuda(b), None)),
                Err(Error::CudaUnavailable(why)) => {
                    Ok((Engine::Cpu(CpuBackend), Some(format!("using the CPU, as CUDA is not usable here: {why}"))))
                }
                Err(e) => Ok((Engine::Cpu(CpuBackend), Some(format!("using the CPU, as CUDA failed to start: {e}")))),
            },
        }
    }
}

impl Backend for Engine {
    fn describe(&self) -> String {
        match self {
            Engine::Cpu(b) => b.describe(),
            Engine::Cuda(b) => b.describe(),
        }
    }

    fn nearest<T: Real>(&self, a: &Points<T>, b: &Points<T>, max_distance: Option<T>) -> Result<Nearest<T>> {
        match self {
            Engine::Cpu(e) => e.nearest(a, b, max_distance),
            Engine::Cuda(e) => e.nearest(a, b, max_distance),
        }
    }

    fn closest_pairs<T: Real>(&self, a: &Points<T>, b: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
        match self {
            Engine::Cpu(e) => e.closest_pairs(a, b, opts),
            Engine::Cuda(e) => e.closest_pairs(a, b, opts),
        }
    }

    fn knn<T: Real>(&self, data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        match self {
            Engine::Cpu(e) => e.knn(data, queries, opts),
            Engine::Cuda(e) => e.knn(data, queries, opts),
        }
    }

    fn closest_points<T: Real>(
        &self,
        mesh: &Mesh<T>,
        queries: &Points<T>,
        opts: &ClosestPointOptions<T>,
    ) -> Result<ClosestPoints<T>> {
        match self {
            Engine::Cpu(e) => e.closest_points(mesh, queries, opts),
            Engine::Cuda(e) => e.closest_points(mesh, queries, opts),
        }
    }

    fn knn_vectors<T: Real>(&self, data: &Vectors<T>, queries: &Vectors<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        match self {
            Engine::Cpu(e) => e.knn_vectors(data, queries, opts),
            Engine::Cuda(e) => e.knn_vectors(data, queries, opts),
        }
    }

    fn approx_knn<T: Real>(
        &self,
        data: &Vectors<T>,
        queries: &Vectors<T>,
        opts: &ShiftedSortOptions,
    ) -> Result<Knn<T>> {
        match self {
            Engine::Cpu(e) => e.approx_knn(data, queries, opts),
            Engine::Cuda(e) => e.approx_knn(data, queries, opts),
        }
    }
}
