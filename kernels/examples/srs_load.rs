//! How fast a `.params` file becomes an SRS image ([`SrsImage::write_params_file`], what the
//! launcher does at start): ROUNDS reads of the same file, each image checked equal to the
//! first.
//!
//! ```text
//! cargo run -p kernels --example srs_load -- FILE [ROUNDS]
//! ```
//!
//! Read the file once before (`cat FILE > /dev/null`) to time the page cache, not the disk.

use std::time::Instant;

use kernels::srs::{scan_params_file, AlignedBytes, SrsImage};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: srs_load FILE [ROUNDS]")?;
    let rounds: usize = args.next().map_or(Ok(2), |r| r.parse())?;
    let lens = scan_params_file(path.as_ref())?;
    let size = SrsImage::size_for(&lens)?;
    let gb = size as f64 / 1e9;
    println!(
        "{path}: {lens:?}, image {gb:.2} GB, {} threads",
        rayon::current_num_threads()
    );
    let (mut first, mut image) = (AlignedBytes::zeroed(size), AlignedBytes::zeroed(size));
    for round in 1..=rounds {
        let dst = if round == 1 { &mut first } else { &mut image };
        let t = Instant::now();
        let file = std::fs::File::open(&path)?;
        SrsImage::write_params_file(&file, &lens, 0, false, dst.as_mut())?;
        let s = t.elapsed().as_secs_f64();
        if round > 1 && first.as_ref() != image.as_ref() {
            return Err("two reads of the file gave different images".into());
        }
        println!("round {round}: {s:.2} s ({:.2} GB/s)", gb / s);
    }
    Ok(())
}
