//! How fast a `.params` file becomes an SRS image: the one-reader stream
//! ([`SrsImage::write_params_stream`]) against the parallel positional reads the launcher uses
//! ([`SrsImage::write_params_file`]), on the same file, alternating, each image checked equal.
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
    let (mut stream, mut parallel) = (AlignedBytes::zeroed(size), AlignedBytes::zeroed(size));
    for round in 1..=rounds {
        let t = Instant::now();
        let file = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(&path)?);
        SrsImage::write_params_stream(file, &lens, 0, false, stream.as_mut())?;
        let s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let file = std::fs::File::open(&path)?;
        SrsImage::write_params_file(&file, &lens, 0, false, parallel.as_mut())?;
        let p = t.elapsed().as_secs_f64();
        if stream.as_ref() != parallel.as_ref() {
            return Err("the two images differ".into());
        }
        println!(
            "round {round}: stream {s:.2} s ({:.2} GB/s), parallel {p:.2} s ({:.2} GB/s): {:.2}x",
            gb / s,
            gb / p,
            s / p
        );
    }
    Ok(())
}
