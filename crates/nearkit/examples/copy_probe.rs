//! A device-machine probe (BENCHMARKS.md, session 49): how fast the host's threads copy into
//! and out of page-locked staging memory, with ordinary stores (`memcpy`) and with
//! non-temporal (streaming) stores, which skip reading each destination line first.
//! `cargo run --release -p nearkit --example copy_probe -- MB...`
use cudarc::driver::{sys, CudaContext, DevicePtr};
use rayon::prelude::*;
use std::arch::x86_64::*;

const PART: usize = 1 << 20;

/// The library's streaming copy (what the staged uploads use).
unsafe fn copy_nt(src: *const u8, dst: *mut u8, len: usize) {
    nearkit::test_hooks::copy_streaming(src, dst, len)
}

/// Copies and finds the largest |bits| of f32 values, with streaming stores.
#[target_feature(enable = "avx2")]
unsafe fn copy_nt_max(src: *const u8, dst: *mut u8, len: usize) -> u32 {
    let head = dst.align_offset(32).min(len);
    std::ptr::copy_nonoverlapping(src, dst, head);
    let mask = _mm256_set1_epi32(0x7fff_ffff);
    let mut m = _mm256_setzero_si256();
    let mut i = head;
    while i + 128 <= len {
        let a = _mm256_loadu_si256(src.add(i) as *const __m256i);
        let b = _mm256_loadu_si256(src.add(i + 32) as *const __m256i);
        let c = _mm256_loadu_si256(src.add(i + 64) as *const __m256i);
        let d = _mm256_loadu_si256(src.add(i + 96) as *const __m256i);
        _mm256_stream_si256(dst.add(i) as *mut __m256i, a);
        _mm256_stream_si256(dst.add(i + 32) as *mut __m256i, b);
        _mm256_stream_si256(dst.add(i + 64) as *mut __m256i, c);
        _mm256_stream_si256(dst.add(i + 96) as *mut __m256i, d);
        let ab = _mm256_max_epu32(_mm256_and_si256(a, mask), _mm256_and_si256(b, mask));
        let cd = _mm256_max_epu32(_mm256_and_si256(c, mask), _mm256_and_si256(d, mask));
        m = _mm256_max_epu32(m, _mm256_max_epu32(ab, cd));
        i += 128;
    }
    std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
    _mm_sfence();
    let mut lanes = [0u32; 8];
    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, m);
    lanes.into_iter().max().unwrap()
}

fn check(c: &[u8]) -> u32 {
    let v = unsafe { std::slice::from_raw_parts(c.as_ptr() as *const u32, c.len() / 4) };
    v.iter().fold(0u32, |m, x| m.max(x & 0x7fff_ffff))
}

fn timed(reps: usize, name: &str, bytes: usize, f: &mut dyn FnMut()) {
    let mut v = Vec::new();
    for _ in 0..reps {
        let t = std::time::Instant::now();
        f();
        v.push(t.elapsed().as_secs_f64());
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p50 = v[reps / 2];
    println!("{name}: min {:.3} p50 {:.3} ms, {:.1} GB/s at p50", v[0] * 1e3, p50 * 1e3, bytes as f64 / p50 / 1e9);
}

#[inline]
fn range_generic(c: &[u32]) -> (u32, u32) {
    let (mut hi, mut lo) = (0u32, u32::MAX);
    for &b in c {
        let a = b & 0x7fff_ffff;
        hi = hi.max(a);
        lo = lo.min(if a == 0 { u32::MAX } else { a });
    }
    (hi, lo)
}

#[target_feature(enable = "avx2")]
unsafe fn range_avx2(c: &[u32]) -> (u32, u32) {
    range_generic(c)
}

/// A point set's three f32 columns staged up as nearkit's upload does: parts copied (memcpy or
/// streaming) and checked (SSE2 or AVX2 loop) in one parallel loop, then three DMAs, waited.
fn columns_up(n: usize, ctx: &std::sync::Arc<CudaContext>, pin: usize) {
    let s = ctx.default_stream().fork().unwrap();
    let cols: Vec<Vec<f32>> = (0..3).map(|c| (0..n).map(|i| (i * 3 + c) as f32 * 0.5).collect()).collect();
    let dev: Vec<_> = (0..3).map(|_| s.alloc_zeros::<f32>(n).unwrap()).collect();
    let dptr: Vec<u64> = dev.iter().map(|d| d.device_ptr(&s).0).collect();
    let bytes = n * 4;
    let cs = s.cu_stream() as usize;
    for part in [128usize << 10, 256 << 10, 1 << 20] {
        for (name, nt, check) in [
            ("memcpy, no check", false, 0),
            ("memcpy, SSE2 check", false, 1),
            ("stream, no check", true, 0),
            ("stream, SSE2 check", true, 1),
            ("stream, AVX2 check", true, 2),
            ("stream fused max only", true, 3),
        ] {
            timed(31, &format!("{n} points up, {} KB parts, {name}", part >> 10), 3 * bytes, &mut || {
                let parts: Vec<(usize, usize, usize)> = (0..3)
                    .flat_map(|c| (0..bytes.div_ceil(part)).map(move |p| (c, p * part, ((p + 1) * part).min(bytes))))
                    .collect();
                let m = parts
                    .into_par_iter()
                    .map(|(c, a, e)| unsafe {
                        let src = (cols[c].as_ptr() as *const u8).add(a);
                        let dst = (pin + c * bytes + a) as *mut u8;
                        if check == 3 {
                            return (copy_nt_max(src, dst, e - a), 0);
                        }
                        if nt {
                            copy_nt(src, dst, e - a)
                        } else {
                            std::ptr::copy_nonoverlapping(src, dst, e - a)
                        }
                        let v = std::slice::from_raw_parts(src as *const u32, (e - a) / 4);
                        match check {
                            1 => range_generic(v),
                            2 => range_avx2(v),
                            _ => (0, 0),
                        }
                    })
                    .reduce(|| (0, u32::MAX), |x, y| (x.0.max(y.0), x.1.min(y.1)));
                std::hint::black_box(m);
                for c in 0..3 {
                    unsafe {
                        sys::cuMemcpyHtoDAsync_v2(dptr[c], (pin + c * bytes) as *const _, bytes, cs as sys::CUstream)
                    }
                    .result()
                    .unwrap();
                }
                s.synchronize().unwrap();
            });
        }
    }
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("columns") {
        let ctx = CudaContext::new(0).unwrap();
        let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(16 << 20, 0) }.unwrap();
        let pin = pinned.as_mut_ptr().unwrap() as usize;
        unsafe { std::ptr::write_bytes(pin as *mut u8, 1, 16 << 20) };
        for n in [400_000, 1_000_000] {
            columns_up(n, &ctx, pin);
        }
        return;
    }
    let sizes: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let sizes = if sizes.is_empty() { vec![12, 48, 600] } else { sizes };
    let ctx = CudaContext::new(0).unwrap();
    let stage = 16 << 20;
    let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(2 * stage, 0) }.unwrap();
    let pin = pinned.as_mut_ptr().unwrap() as usize;
    unsafe { std::ptr::write_bytes(pin as *mut u8, 1, 2 * stage) };
    let s = ctx.default_stream().fork().unwrap();
    let dev = s.alloc_zeros::<u8>(2 * stage).unwrap();
    let dptr = dev.device_ptr(&s).0;
    println!("threads {}", rayon::current_num_threads());
    for mb in sizes {
        let bytes = mb << 20;
        let reps = if mb > 100 { 5 } else { 21 };
        let src: Vec<u8> = (0..bytes).map(|i| (i * 7) as u8 & 0x3f).collect();
        let sp = src.as_ptr() as usize;
        // Up: the source into the two 16 MB staging buffers in turn (as the staging loop does),
        // no DMA: the host's side alone.
        for (name, nt, chk) in [
            ("memcpy", false, false),
            ("memcpy + check", false, true),
            ("stream", true, false),
            ("stream + check", true, true),
        ] {
            timed(reps, &format!("{mb} MB up-copy, {name}"), bytes, &mut || {
                let m: u32 = (0..bytes.div_ceil(PART))
                    .into_par_iter()
                    .map(|p| {
                        let (a, e) = (p * PART, ((p + 1) * PART).min(bytes));
                        let d = pin + (a % (2 * stage));
                        unsafe {
                            match (nt, chk) {
                                (false, false) => {
                                    std::ptr::copy_nonoverlapping((sp + a) as *const u8, d as *mut u8, e - a);
                                    0
                                }
                                (false, true) => {
                                    std::ptr::copy_nonoverlapping((sp + a) as *const u8, d as *mut u8, e - a);
                                    check(std::slice::from_raw_parts((sp + a) as *const u8, e - a))
                                }
                                (true, false) => {
                                    copy_nt((sp + a) as *const u8, d as *mut u8, e - a);
                                    0
                                }
                                (true, true) => copy_nt_max((sp + a) as *const u8, d as *mut u8, e - a),
                            }
                        }
                    })
                    .max()
                    .unwrap_or(0);
                std::hint::black_box(m);
            });
        }
        // Up with DMA: a staging buffer-full at a time, the DMA of one overlapping the copy of
        // the next (the staging loop's shape).
        for (name, nt) in [("memcpy", false), ("stream", true)] {
            let cs = s.cu_stream() as usize;
            timed(reps, &format!("{mb} MB staged up with DMA, {name}"), bytes, &mut || {
                let mut events: [Option<cudarc::driver::CudaEvent>; 2] = [None, None];
                for (k, off) in (0..bytes).step_by(stage).enumerate() {
                    let b = k % 2;
                    if let Some(e) = events[b].take() {
                        e.synchronize().unwrap();
                    }
                    let len = stage.min(bytes - off);
                    (0..len.div_ceil(PART)).into_par_iter().for_each(|p| {
                        let (a, e) = (p * PART, ((p + 1) * PART).min(len));
                        let d = pin + b * stage + a;
                        unsafe {
                            if nt {
                                copy_nt((sp + off + a) as *const u8, d as *mut u8, e - a)
                            } else {
                                std::ptr::copy_nonoverlapping((sp + off + a) as *const u8, d as *mut u8, e - a)
                            }
                        }
                    });
                    unsafe {
                        sys::cuMemcpyHtoDAsync_v2(
                            dptr + (b * stage) as u64,
                            (pin + b * stage) as *const _,
                            len,
                            cs as sys::CUstream,
                        )
                        .result()
                        .unwrap()
                    };
                    events[b] = Some(s.record_event(None).unwrap());
                }
                s.synchronize().unwrap();
            });
        }
        // Down: the staging buffers into fresh memory (a new vector each time, huge pages
        // advised as nearkit's big_vec does), with and without streaming stores.
        for (name, nt, huge) in [
            ("memcpy", false, false),
            ("stream", true, false),
            ("memcpy, huge", false, true),
            ("stream, huge", true, true),
        ] {
            timed(reps, &format!("{mb} MB down-copy into fresh memory, {name}"), bytes, &mut || {
                let mut v: Vec<u8> = if huge { nearkit_big_vec(bytes) } else { Vec::with_capacity(bytes) };
                let vp = v.as_mut_ptr() as usize;
                (0..bytes.div_ceil(PART)).into_par_iter().for_each(|p| {
                    let (a, e) = (p * PART, ((p + 1) * PART).min(bytes));
                    let from = pin + (a % (2 * stage));
                    unsafe {
                        if nt {
                            copy_nt(from as *const u8, (vp + a) as *mut u8, e - a)
                        } else {
                            std::ptr::copy_nonoverlapping(from as *const u8, (vp + a) as *mut u8, e - a)
                        }
                    }
                });
                unsafe { v.set_len(bytes) };
                std::hint::black_box(&v);
            });
        }
        // Down into memory already faulted in (a reused vector).
        let mut reused = vec![0u8; bytes];
        let rp = reused.as_mut_ptr() as usize;
        for (name, nt) in [("memcpy", false), ("stream", true)] {
            timed(reps, &format!("{mb} MB down-copy into reused memory, {name}"), bytes, &mut || {
                (0..bytes.div_ceil(PART)).into_par_iter().for_each(|p| {
                    let (a, e) = (p * PART, ((p + 1) * PART).min(bytes));
                    let from = pin + (a % (2 * stage));
                    unsafe {
                        if nt {
                            copy_nt(from as *const u8, (rp + a) as *mut u8, e - a)
                        } else {
                            std::ptr::copy_nonoverlapping(from as *const u8, (rp + a) as *mut u8, e - a)
                        }
                    }
                });
            });
        }
        timed(reps, &format!("{mb} MB read (max of u32)"), bytes, &mut || {
            let m = src.par_chunks(PART).map(check).max();
            std::hint::black_box(m);
        });
    }
}

fn nearkit_big_vec(bytes: usize) -> Vec<u8> {
    let v = Vec::with_capacity(bytes);
    const HUGE: usize = 2 << 20;
    let lo = (v.as_ptr() as usize).next_multiple_of(HUGE);
    let hi = (v.as_ptr() as usize + bytes) / HUGE * HUGE;
    if hi > lo {
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
    v
}
