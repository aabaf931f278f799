//! What Rust and CUDA share, defined once, in Rust.
//!
//! - Constants: each source file (`CudaSource`) lists the Rust constants it uses; they are
//!   written into the module's source as `#define NK_NAME value`.
//! - Structs passed to kernels (`c_struct!`): declared in Rust with each field's C type; the C
//!   definition is generated from that declaration into the source, before the file that
//!   uses it, and a `static_assert` checks its size against the Rust struct's.
//! - Kernels (`kernels!`): one line per kernel with its parameters' types. The macro makes a
//!   typed launcher per kernel, and the module's source ends with a `static_assert` per kernel
//!   that its C parameters are the declared ones: a kernel whose parameters differ from its
//!   Rust declaration fails to compile, and CI compiles every module. That check is the
//!   safety argument of every launch: the launcher passes exactly the declared arguments, so
//!   the kernel reads what it was declared to read.

use std::fmt::Write;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr};

use crate::geometry::real::Real;

/// A C type name, as the kernels spell it.
pub(crate) trait CType {
    fn c_type() -> String;
}

impl<T: Real> CType for T {
    fn c_type() -> String {
        (if T::NAME == "f32" { "float" } else { "double" }).into()
    }
}

macro_rules! c_type_names {
    ($($t:ty => $c:literal),*) => {
        $(impl CType for $t {
            fn c_type() -> String {
                $c.into()
            }
        })*
    };
}
c_type_names!(u32 => "u32", u64 => "u64", i32 => "int", i64 => "long long");

/// A kernel parameter kind: device memory the kernel reads (`In<T>`: `const T*`), device
/// memory it writes (`Out<T>`: `T*`), or a value (a scalar, or a `c_struct!` by value).
pub(crate) trait Param {
    /// What is pushed to the launch.
    type Raw: DeviceRepr;
    /// The parameter's C type.
    fn c_type() -> String;
}

/// A read-only device array parameter, `const T*` in C.
pub(crate) struct In<T>(PhantomData<T>);
/// A device array the kernel writes, `T*` in C.
pub(crate) struct Out<T>(PhantomData<T>);

impl<T: CType> Param for In<T> {
    type Raw = u64;
    fn c_type() -> String {
        format!("const {}*", T::c_type())
    }
}

impl<T: CType> Param for Out<T> {
    type Raw = u64;
    fn c_type() -> String {
        format!("{}*", T::c_type())
    }
}

impl<T: CType + DeviceRepr> Param for T {
    type Raw = T;
    fn c_type() -> String {
        T::c_type()
    }
}

/// What a launcher accepts for a parameter of kind `K`: device slices and views for arrays,
/// the value itself for values.
pub(crate) trait Arg<K: Param> {
    fn raw(self, s: &Arc<CudaStream>) -> K::Raw;
}

impl<K: Param<Raw = K>> Arg<K> for K {
    fn raw(self, _: &Arc<CudaStream>) -> K {
        self
    }
}

/// A device address that may be null, for kernels that take "none" as a null pointer.
#[derive(Clone, Copy)]
pub(crate) struct Address<T>(pub u64, pub PhantomData<T>);

impl<T> Address<T> {
    pub const NULL: Self = Address(0, PhantomData);

    pub fn of(slice: &CudaSlice<T>, s: &Arc<CudaStream>) -> Self {
        Address(slice.device_ptr(s).0, PhantomData)
    }

    /// A raw address (of device memory, or of page-locked host memory mapped for the device).
    pub fn raw(address: u64) -> Self {
        Address(address, PhantomData)
    }
}

impl<T: CType> Arg<In<T>> for Address<T> {
    fn raw(self, _: &Arc<CudaStream>) -> u64 {
        self.0
    }
}

impl<T: CType> Arg<Out<T>> for Address<T> {
    fn raw(self, _: &Arc<CudaStream>) -> u64 {
        self.0
    }
}

impl<T: CType> Arg<In<T>> for &CudaSlice<T> {
    fn raw(self, s: &Arc<CudaStream>) -> u64 {
        self.device_ptr(s).0
    }
}

impl<T: CType> Arg<In<T>> for &mut CudaSlice<T> {
    fn raw(self, s: &Arc<CudaStream>) -> u64 {
        self.device_ptr(s).0
    }
}

impl<T: CType> Arg<In<T>> for &CudaView<'_, T> {
    fn raw(self, s: &Arc<CudaStream>) -> u64 {
        self.device_ptr(s).0
    }
}

impl<T: CType> Arg<Out<T>> for &mut CudaSlice<T> {
    fn raw(self, s: &Arc<CudaStream>) -> u64 {
        self.device_ptr_mut(s).0
    }
}

impl<T: CType> Arg<Out<T>> for &mut CudaViewMut<'_, T> {
    fn raw(self, s: &Arc<CudaStream>) -> u64 {
        self.device_ptr_mut(s).0
    }
}

/// A kernel's C name and parameter types, for its `static_assert`.
pub(crate) struct Signature {
    /// The kernel's C name (`name_f32`, `name_f64` for an instantiated template).
    pub path: String,
    pub params: Vec<String>,
}

/// One file of a module's source, the Rust constants it uses (`#define NK_NAME value`), and
/// the `c_struct!`s it uses, whose C definitions go before it.
pub(crate) struct CudaSource {
    pub file: &'static str,
    pub text: &'static str,
    pub constants: fn() -> Vec<(&'static str, String)>,
    pub structs: fn() -> Vec<String>,
}

impl CudaSource {
    /// A file that uses no constants or structs of the Rust code.
    pub const fn plain(file: &'static str, text: &'static str) -> Self {
        CudaSource { file, text, constants: Vec::new, structs: Vec::new }
    }
}

/// A struct shared with the kernels (`c_struct!`): its C definition, generated from the Rust
/// one, and a check of its size.
pub(crate) trait CStruct {
    fn c_definition() -> String;
}

/// A compiled unit of kernels (one NVRTC program), built on first use by each GPU.
pub(crate) struct KernelModule {
    pub name: &'static str,
    /// Files in include order.
    pub parts: &'static [&'static CudaSource],
    pub signatures: fn() -> Vec<Signature>,
}

impl KernelModule {
    /// The program NVRTC compiles: the constants, the parts (each after the structs it
    /// uses), then the kernels' checks.
    pub fn source(&self) -> String {
        let mut s = String::from("// Generated by nearkit: constants from the Rust code.\n");
        for part in self.parts {
            for (name, value) in (part.constants)() {
                let _ = writeln!(s, "#define NK_{name} {value}");
            }
        }
        s.push_str(SAME_TYPE);
        for part in self.parts {
            let _ = writeln!(s, "\n// ---- {} ----", part.file);
            for def in (part.structs)() {
                let _ = writeln!(s, "{def}");
            }
            let _ = writeln!(s, "{}", part.text);
        }
        s.push_str("\n// ---- checks: the Rust declarations of the kernels ----\n");
        for sig in (self.signatures)() {
            let _ = writeln!(
                s,
                "static_assert(nk_same<decltype({0}), void({1})>::value, \"{0}: the kernel's parameters differ from its \
                 Rust declaration\");",
                sig.path,
                sig.params.join(", ")
            );
        }
        s
    }
}

/// `nk_same<A, B>::value`: whether two types are the same (NVRTC has no <type_traits>
/// without CUB).
const SAME_TYPE: &str = "template <typename A, typename B> struct nk_same { static const bool value = false; };\n\
                         template <typename A> struct nk_same<A, A> { static const bool value = true; };\n";

/// The C definition of a struct from its Rust declaration: `name` (`Tree<{R}>` for a
/// template over the coordinate type `R`), its fields' C types (an array as `int[3]`), and
/// the sizes of the Rust struct in f32 and f64 (equal when it is not a template). NVRTC has
/// no constant `offsetof`, so the fields' offsets are not checked: they are the Rust ones by
/// construction, C and Rust laying out `#[repr(C)]` fields alike; the sizes are checked.
pub(crate) fn c_definition(name: &str, fields: &[(&str, &str)], size_f32: usize, size_f64: usize) -> String {
    let (base, template) = match name.split_once("<{R}>") {
        Some((base, _)) => (base, true),
        None => (name, false),
    };
    let mut s = String::new();
    if template {
        s.push_str("template <typename R>\n");
    }
    let _ = writeln!(s, "struct {base} {{");
    for (f, c) in fields {
        match c.split_once('[') {
            Some((ty, dims)) => {
                let _ = writeln!(s, "    {ty} {f}[{dims};");
            }
            None => {
                let _ = writeln!(s, "    {c} {f};");
            }
        }
    }
    s.push_str("};\n");
    if template {
        for (real, size) in [("float", size_f32), ("double", size_f64)] {
            let _ = writeln!(
                s,
                "static_assert(sizeof({base}<{real}>) == {size}, \"{base}<{real}>: its size differs from the Rust \
                 struct's\");"
            );
        }
    } else {
        let _ = writeln!(
            s,
            "static_assert(sizeof({base}) == {size_f32}, \"{base}: its size differs from the Rust struct's\");"
        );
    }
    s
}

/// Declares a struct shared with the kernels (passed by value, or read from device memory):
/// `#[repr(C)]`, plain old data, with its C name (`{R}` stands for the coordinate type of a
/// template) and each field's C type. Its C definition is generated from this declaration
/// (`c_definition`).
macro_rules! c_struct {
    ($(#[$m:meta])* $vis:vis struct $name:ident <$t:ident> as $c:literal {
        $($(#[$fm:meta])* $f:ident : $ft:ty = $fc:literal),* $(,)?
    }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        $vis struct $name<$t> {
            $($(#[$fm])* pub $f: $ft,)*
            pub _real: std::marker::PhantomData<$t>,
        }
        // SAFETY: plain old data; the kernels' definition of it is generated from this one.
        unsafe impl<$t: $crate::geometry::real::Real> cudarc::driver::DeviceRepr for $name<$t> {}
        impl<$t: $crate::geometry::real::Real> $crate::runtime::cuda::launch::CType for $name<$t> {
            fn c_type() -> String {
                $c.replace("{R}", &<$t as $crate::runtime::cuda::launch::CType>::c_type())
            }
        }
        impl<$t: $crate::geometry::real::Real> $crate::runtime::cuda::launch::CStruct for $name<$t> {
            fn c_definition() -> String {
                $crate::runtime::cuda::launch::c_definition(
                    $c,
                    &[$((stringify!($f), $fc)),*],
                    std::mem::size_of::<$name<f32>>(),
                    std::mem::size_of::<$name<f64>>(),
                )
            }
        }
    };
    ($(#[$m:meta])* $vis:vis struct $name:ident as $c:literal {
        $($(#[$fm:meta])* $f:ident : $ft:ty = $fc:literal),* $(,)?
    }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        $vis struct $name {
            $($(#[$fm])* pub $f: $ft,)*
        }
        // SAFETY: plain old data; the kernels' definition of it is generated from this one.
        unsafe impl cudarc::driver::DeviceRepr for $name {}
        impl $crate::runtime::cuda::launch::CType for $name {
            fn c_type() -> String {
                $c.into()
            }
        }
        impl $crate::runtime::cuda::launch::CStruct for $name {
            fn c_definition() -> String {
                let size = std::mem::size_of::<Self>();
                $crate::runtime::cuda::launch::c_definition($c, &[$((stringify!($f), $fc)),*], size, size)
            }
        }
    };
}

/// Declares a CUDA module and its kernels:
///
/// ```ignore
/// kernels! {
///     module KERNELS = "tree", [&COMMON, &TREE_HEADER, &TREE_BUILD];
///     /// Morton keys of points in a frame.
///     fn morton_keys<T>(x: In<T>, y: In<T>, z: In<T>, n: u32, frame: In<T>, shift: u32, keys: Out<u64>, vals: Out<u32>);
///     fn key_table(codes: In<u64>, n: u32, table: Out<u32>);
///     fn vector_knn<T>[vector_variants](qcols: In<T>, ...);
/// }
/// ```
///
/// Each kernel gets `fn name(gpu, cfg, args...)` (generic kernels also a type parameter: the
/// kernel `name_f32` or `name_f64` runs; variant kernels a `variant: &str` first, naming
/// `name{variant}_f32`, and a list of the variants that exist, for the checks).
macro_rules! kernels {
    (
        module $module:ident = $mname:literal, [$($part:expr),* $(,)?];
        $($rest:tt)*
    ) => {
        pub(crate) static $module: $crate::runtime::cuda::launch::KernelModule = $crate::runtime::cuda::launch::KernelModule {
            name: $mname,
            parts: &[$($part),*],
            signatures: module_signatures,
        };

        #[allow(clippy::vec_init_then_push)]
        fn module_signatures() -> Vec<$crate::runtime::cuda::launch::Signature> {
            let mut v = Vec::new();
            $crate::runtime::cuda::launch::kernels!(@signatures v; $($rest)*);
            v
        }

        $crate::runtime::cuda::launch::kernels!(@launchers $module; $($rest)*);
    };

    (@signatures $v:ident;) => {};
    (@signatures $v:ident; $(#[$m:meta])* fn $name:ident <$t:ident> ($($p:ident : $ty:ty),* $(,)?); $($rest:tt)*) => {
        {
            fn params<$t: $crate::geometry::real::Real>() -> Vec<String> {
                vec![$(<$ty as $crate::runtime::cuda::launch::Param>::c_type()),*]
            }
            for real in ["f32", "f64"] {
                let params = if real == "f32" { params::<f32>() } else { params::<f64>() };
                $v.push($crate::runtime::cuda::launch::Signature {
                    path: format!("{}_{real}", stringify!($name)),
                    params,
                });
            }
        }
        $crate::runtime::cuda::launch::kernels!(@signatures $v; $($rest)*);
    };
    (@signatures $v:ident; $(#[$m:meta])* fn $name:ident <$t:ident> [$variants:expr] ($($p:ident : $ty:ty),* $(,)?); $($rest:tt)*) => {
        {
            fn params<$t: $crate::geometry::real::Real>() -> Vec<String> {
                vec![$(<$ty as $crate::runtime::cuda::launch::Param>::c_type()),*]
            }
            for variant in $variants {
                for real in ["f32", "f64"] {
                    let params = if real == "f32" { params::<f32>() } else { params::<f64>() };
                    $v.push($crate::runtime::cuda::launch::Signature {
                        path: format!("{}{variant}_{real}", stringify!($name)),
                        params,
                    });
                }
            }
        }
        $crate::runtime::cuda::launch::kernels!(@signatures $v; $($rest)*);
    };
    (@signatures $v:ident; $(#[$m:meta])* fn $name:ident ($($p:ident : $ty:ty),* $(,)?); $($rest:tt)*) => {
        $v.push($crate::runtime::cuda::launch::Signature {
            path: stringify!($name).to_string(),
            params: vec![$(<$ty as $crate::runtime::cuda::launch::Param>::c_type()),*],
        });
        $crate::runtime::cuda::launch::kernels!(@signatures $v; $($rest)*);
    };

    (@launchers $module:ident;) => {};
    (@launchers $module:ident; $(#[$m:meta])* fn $name:ident <$t:ident> ($($p:ident : $ty:ty),* $(,)?); $($rest:tt)*) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments, dead_code)]
        pub(crate) fn $name<$t: $crate::geometry::real::Real>(
            gpu: &$crate::runtime::cuda::Gpu,
            cfg: cudarc::driver::LaunchConfig,
            $($p: impl $crate::runtime::cuda::launch::Arg<$ty>),*
        ) -> $crate::error::Result<()> {
            let f = gpu.function(&$module, &format!("{}_{}", stringify!($name), $t::NAME))?;
            let s = gpu.stream();
            $(let $p = $p.raw(s);)*
            let mut l = s.launch_builder(&f);
            $(cudarc::driver::PushKernelArg::arg(&mut l, &$p);)*
            // SAFETY: the arguments are the kernel's parameters, as the module's checks prove
            // (see `runtime::cuda::launch`); the caller sizes the arrays for `cfg`.
            unsafe { l.launch(cfg) }.map(drop).map_err($crate::runtime::cuda::cuda_err)
        }
        $crate::runtime::cuda::launch::kernels!(@launchers $module; $($rest)*);
    };
    (@launchers $module:ident; $(#[$m:meta])* fn $name:ident <$t:ident> [$variants:expr] ($($p:ident : $ty:ty),* $(,)?); $($rest:tt)*) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments, dead_code)]
        pub(crate) fn $name<$t: $crate::geometry::real::Real>(
            gpu: &$crate::runtime::cuda::Gpu,
            cfg: cudarc::driver::LaunchConfig,
            variant: &str,
            $($p: impl $crate::runtime::cuda::launch::Arg<$ty>),*
        ) -> $crate::error::Result<()> {
            let f = gpu.function(&$module, &format!("{}{variant}_{}", stringify!($name), $t::NAME))?;
            let s = gpu.stream();
            $(let $p = $p.raw(s);)*
            let mut l = s.launch_builder(&f);
            $(cudarc::driver::PushKernelArg::arg(&mut l, &$p);)*
            // SAFETY: as for every launcher (see `runtime::cuda::launch`); each variant is
            // checked.
            unsafe { l.launch(cfg) }.map(drop).map_err($crate::runtime::cuda::cuda_err)
        }
        $crate::runtime::cuda::launch::kernels!(@launchers $module; $($rest)*);
    };
    (@launchers $module:ident; $(#[$m:meta])* fn $name:ident ($($p:ident : $ty:ty),* $(,)?); $($rest:tt)*) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments, dead_code)]
        pub(crate) fn $name(
            gpu: &$crate::runtime::cuda::Gpu,
            cfg: cudarc::driver::LaunchConfig,
            $($p: impl $crate::runtime::cuda::launch::Arg<$ty>),*
        ) -> $crate::error::Result<()> {
            let f = gpu.function(&$module, stringify!($name))?;
            let s = gpu.stream();
            $(let $p = $p.raw(s);)*
            let mut l = s.launch_builder(&f);
            $(cudarc::driver::PushKernelArg::arg(&mut l, &$p);)*
            // SAFETY: as for every launcher (see `runtime::cuda::launch`).
            unsafe { l.launch(cfg) }.map(drop).map_err($crate::runtime::cuda::cuda_err)
        }
        $crate::runtime::cuda::launch::kernels!(@launchers $module; $($rest)*);
    };
}

pub(crate) use {c_struct, kernels};

/// The C definitions of `c_struct!`s, in order (for `CudaSource::structs`).
macro_rules! c_definitions {
    ($($s:ty),* $(,)?) => {
        || vec![$(<$s as $crate::runtime::cuda::launch::CStruct>::c_definition()),*]
    };
}

pub(crate) use c_definitions;
