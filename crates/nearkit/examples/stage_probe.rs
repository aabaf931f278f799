//! A device probe (BENCHMARKS.md, session 48): how fast this machine gets host memory to GPU 0,
//! by the ways nearkit could stage it. `cargo run --release -p nearkit --example stage_probe --
//! POINTS` times three f32 columns of POINTS values each, sent together (16 threads copy them
//! into page-locked memory, each part's largest |value| found after its copy, then three
//! transfers), against the driver's own staging and the check alone; then one buffer of the
//! same bytes, copied by one thread or many, sent whole or in pieces as they fill.
use cudarc::driver::{sys, CudaContext, DevicePtr};
use rayon::prelude::*;

fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(1_000_000);
    let reps = 30;
    let bytes = n * 4;
    let ctx = CudaContext::new(0).unwrap();
    let s = ctx.default_stream().fork().unwrap();
    let streams: Vec<_> = (0..3).map(|_| s.fork().unwrap()).collect();
    let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(16 << 20, 0) }.unwrap();
    let pin = pinned.as_mut_ptr().unwrap() as usize;
    unsafe { std::ptr::write_bytes(pin as *mut u8, 1, 16 << 20) };
    let cols: Vec<Vec<f32>> = (0..3).map(|c| (0..n).map(|i| (i * 3 + c) as f32 * 1e-6).collect()).collect();
    let dev: Vec<_> = (0..3).map(|_| s.alloc_zeros::<f32>(n).unwrap()).collect();
    let dptr: Vec<u64> = dev.iter().map(|d| d.device_ptr(&s).0).collect();
    let cs = s.cu_stream() as usize;
    let run = |name: &str, f: &dyn Fn()| timed(reps, name, f, &|| ctx.synchronize().unwrap());
    let check = |c: &[f32]| c.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
    for part in [128usize << 10, 256 << 10, 512 << 10, 1 << 20] {
        run(&format!("staged, one region, {} KB parts, checked", part >> 10), &|| {
            let parts: Vec<(usize, usize, usize)> = (0..3)
                .flat_map(|c| (0..bytes.div_ceil(part)).map(move |p| (c, p * part, ((p + 1) * part).min(bytes))))
                .collect();
            let m: u32 = parts
                .into_par_iter()
                .map(|(c, a, e)| unsafe {
                    let src = (cols[c].as_ptr() as *const u8).add(a);
                    std::ptr::copy_nonoverlapping(src, (pin + c * bytes + a) as *mut u8, e - a);
                    check(std::slice::from_raw_parts(src as *const f32, (e - a) / 4))
                })
                .max()
                .unwrap();
            std::hint::black_box(m);
            for c in 0..3 {
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(dptr[c], (pin + c * bytes) as *const _, bytes, cs as sys::CUstream)
                }
                .result()
                .unwrap();
            }
        });
    }
    run("pageable, a column at a time, unchecked", &|| {
        for c in 0..3 {
            unsafe { sys::cuMemcpyHtoDAsync_v2(dptr[c], cols[c].as_ptr() as *const _, bytes, cs as sys::CUstream) }
                .result()
                .unwrap();
        }
    });
    run("pageable, three threads and streams, unchecked", &|| {
        (0..3usize).into_par_iter().for_each(|c| {
            ctx.bind_to_thread().unwrap();
            let st = streams[c].cu_stream() as usize;
            unsafe { sys::cuMemcpyHtoDAsync_v2(dptr[c], cols[c].as_ptr() as *const _, bytes, st as sys::CUstream) }
                .result()
                .unwrap();
        });
    });
    run("check only, parallel 256 KB parts", &|| {
        let parts: Vec<&[f32]> = cols.iter().flat_map(|c| c.chunks(65536)).collect();
        let m: u32 = parts.into_par_iter().map(check).max().unwrap();
        std::hint::black_box(m);
    });
    one_buffer(&ctx, 3 * bytes);
}

/// Prints the best and the median time of `reps` runs of `f`, each waited for by `sync`.
fn timed(reps: usize, name: &str, f: &dyn Fn(), sync: &dyn Fn()) {
    let mut v = Vec::new();
    for _ in 0..reps {
        let t = std::time::Instant::now();
        f();
        sync();
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("{name}: min {:.3} p50 {:.3} ms", v[0], v[reps / 2]);
}

/// One buffer of `bytes`: copied into page-locked memory by one thread or many, then sent
/// whole, or sent a piece at a time as its parts are copied.
fn one_buffer(ctx: &std::sync::Arc<CudaContext>, bytes: usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let reps = 30;
    let s = ctx.default_stream().fork().unwrap();
    let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }.unwrap();
    let pin = pinned.as_mut_ptr().unwrap() as usize;
    unsafe { std::ptr::write_bytes(pin as *mut u8, 1, bytes) };
    let src: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
    let dev = s.alloc_zeros::<u8>(bytes).unwrap();
    let dptr = dev.device_ptr(&s).0;
    let cs = s.cu_stream() as usize;
    let dma = |off: usize, len: usize| unsafe {
        sys::cuMemcpyHtoDAsync_v2(dptr + off as u64, (pin + off) as *const _, len, cs as sys::CUstream)
            .result()
            .unwrap();
    };
    let run =
        |name: &str, f: &dyn Fn()| timed(reps, &format!("{bytes} bytes, {name}"), f, &|| s.synchronize().unwrap());
    run("DMA only", &|| dma(0, bytes));
    run("1 thread copy, then DMA", &|| {
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), pin as *mut u8, bytes) };
        dma(0, bytes);
    });
    for part in [256usize << 10, 1 << 20] {
        run(&format!("par copy ({} KB parts), then DMA", part >> 10), &|| {
            (0..bytes.div_ceil(part)).into_par_iter().for_each(|p| {
                let (a, e) = (p * part, ((p + 1) * part).min(bytes));
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(a), (pin + a) as *mut u8, e - a) };
            });
            dma(0, bytes);
        });
    }
    for (part, piece) in [(256usize << 10, 1usize << 20), (512 << 10, 2 << 20), (1 << 20, 4 << 20)] {
        run(&format!("par copy ({} KB parts), DMA per {} KB piece as it fills", part >> 10, piece >> 10), &|| {
            let per = piece / part;
            let left: Vec<AtomicUsize> = (0..bytes.div_ceil(piece))
                .map(|q| AtomicUsize::new(((q + 1) * piece).min(bytes).div_ceil(part) - (q * piece) / part))
                .collect();
            (0..bytes.div_ceil(part)).into_par_iter().for_each(|p| {
                let (a, e) = (p * part, ((p + 1) * part).min(bytes));
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(a), (pin + a) as *mut u8, e - a) };
                let q = p / per;
                if left[q].fetch_sub(1, Ordering::AcqRel) == 1 {
                    ctx.bind_to_thread().unwrap();
                    let (qa, qe) = (q * piece, ((q + 1) * piece).min(bytes));
                    dma(qa, qe - qa);
                }
            });
        });
    }
    run("pageable DMA (driver staging)", &|| unsafe {
        sys::cuMemcpyHtoDAsync_v2(dptr, src.as_ptr() as *const _, bytes, cs as sys::CUstream).result().unwrap();
    });
}
