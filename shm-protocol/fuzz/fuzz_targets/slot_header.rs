//! Random bytes as a slot header image plus a data span: the decoder must never panic or read
//! out of bounds, and whatever it accepts must lie inside the span, for both slot kinds (full and
//! witness: the kind word at offset 40 chooses which fields are read).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shm_protocol::{check_slot_image, ErrorKind, SlotField, SlotKind};

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose the span length in words, then the header image, then the span.
    let (span_words, rest) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => return,
    };
    let split = rest.len().min(8192);
    let (header, tail) = rest.split_at(split);
    let span: Vec<u64> = (0..span_words)
        .map(|k| {
            let at = (k * 8) % tail.len().max(1);
            tail.get(at..at + 8).map_or(k as u64, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        })
        .collect();
    match check_slot_image(header, &span) {
        Ok((_, layout)) => {
            for f in SlotField::ARRAYS.into_iter().chain(SlotField::WITNESS_ARRAYS) {
                assert!(layout.data_range(f).end <= span.len() * 8);
            }
            // Only the arrays of the slot's kind hold data.
            let other = match layout.kind() {
                SlotKind::Full => &SlotField::WITNESS_ARRAYS[..],
                SlotKind::Witness => &SlotField::ARRAYS[..],
            };
            assert!(other.iter().all(|&f| layout.data_range(f).is_empty()));
        }
        Err(e) => assert!(matches!(e.kind(), ErrorKind::InvalidSlot { .. })),
    }
});
