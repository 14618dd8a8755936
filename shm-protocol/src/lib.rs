//! The shared-memory slot ring between `synth-proc` (producers) and `gpu-proc` (consumers).
//!
//! Synthesized circuits travel from the synthesis process to the GPU process through slots of a
//! ring in a memfd-backed, huge-page [`Region`], without a copy: the producer writes a, b, c, the
//! assignments and the density bitmaps straight into a slot, the consumer proves from the same
//! memory, and the launcher that created the ring collects results and frees slots. A slot is
//! of one of two kinds ([`SlotKind`]): **full** (those arrays) or **witness** (the inputs, the
//! bit variables' values one bit each and the other aux values: a prover holding the circuit's
//! matrices computes the rest, from a fraction of the bytes).
//!
//! Main types:
//! - [`Region`]: the memfd mapping (1 GiB → 2 MiB → THP → plain pages, prefaulted, sealed), also
//!   used alone for the SRS; [`pass_to`] hands its fd to a child.
//! - [`Ring`]: the versioned header and the slot table over a region; [`SlotWriter`],
//!   [`ClaimedSlot`] and [`DoneSlot`] are the handles that own a slot in WRITING, CLAIMED and
//!   DONE; [`SlotView`] is the validated, zero-copy view a consumer proves from
//!   ([`SlotView::witness`] for a witness slot: [`SlotWriter::begin_witness`],
//!   [`SlotWriter::publish_witness`], sized by [`WitnessCapacity::slot_bytes`]).
//! - [`Error`] / [`ErrorKind`]: every failure, including [`ErrorKind::StaleSlot`] for a handle
//!   whose slot was reclaimed and [`ErrorKind::InvalidSlot`] naming the bad header field.
//!
//! - [`control`]: the small control messages (job assignment, heartbeats, timeline events) that
//!   travel beside the ring over a Unix socket; bulk data never does.
//!
//! The state machine, ownership rules and crash behaviour are described at the top of the
//! [`ring`] module.
//!
//! # Byte layout of a ring (layout version 3, native byte order)
//!
//! ```text
//! offset 0      ring header (4096 bytes)
//!               0   magic "SPRVRING"          u64
//!               8   layout version            u32   0 = not initialised; written LAST
//!              12   header bytes (4096)       u32
//!              16   slot header bytes (8192)  u32
//!              20   slot count                u32   all classes together
//!              24   slot bytes                u64   the largest class's (a multiple of 4096)
//!              32   slots offset (4096)       u64
//!              40   data offset               u64   4096 + count × 8192
//!              48   ring bytes                u64   data offset + Σ class count × class bytes
//!              56   page kind                 u32   1=1G 2=2M 3=THP 4=plain (informational)
//!              60   result capacity (4096)    u32
//!              64   epoch                     u64   bumped by the launcher on restart
//!              72   publish ticket            u64
//!             128   FREE event  {seq u32, waiters u32}   one 64-byte line each
//!             192   READY event
//!             256   DONE event
//!             320   class count               u32   1..=8 slot sizes
//!             384   classes[8] {slot count u32, pad u32, slot bytes u64}   smallest first,
//!                   each size a multiple of 4096 and larger than the one before
//! offset 4096   slot header i at 4096 + i × 8192
//!               0   state word    u64  state:3 | meta:1 | owner pid:23 | generation:37
//!               8   ticket        u64  claim order: (255 - priority) << 56 | publish sequence
//!              16   job id u64 · 24 circuit id u64 · 32 partition u32 · 36 attempt u32
//!              40   kind u32       0 = full, 1 = witness; the other kind's fields are 0
//!                   full slot:
//!              64   offsets[8]     u64  bytes from the slot's data start:
//!                                       a, b, c, input, aux, dens A-aux, B-input, B-aux
//!             128   capacities[8]  u64  elements (32-byte Scalars) / words (u64) for bitmaps
//!             192   n, inputs, aux u64
//!             216   density bits[3]  u64   = aux, inputs, aux
//!             240   popcounts[3]     u64
//!                   witness slot:
//!             264   offsets[3]     u64  input, bit values, non-bits
//!             288   capacities[3]  u64  elements / words / elements
//!             312   inputs, bits, non-bits u64   (aux = bits + non-bits)
//!             336   ones           u64  popcount of the bit values
//!             512   result status u32 (1 proof, 2 failed) · 516 result len u32
//!            4096   result bytes [4096]
//! data offset   the slots' data spans in slot order: class 0's slots (its slot bytes each),
//!               then class 1's, ...; slot i's span is its class's size
//!               a[n] b[n] c[n] input[inputs] aux[aux] : blstrs Scalar (4 × u64, Montgomery)
//!               A-aux[⌈aux/64⌉] B-input[⌈inputs/64⌉] B-aux[⌈aux/64⌉] : u64, LSB first
//!               each array starts 64-byte aligned (packed in this order by `begin`)
//!               a witness slot: input[inputs] : Scalar; bit values[⌈bits/64⌉] : u64, LSB
//!               first, bit j = the j-th bit variable in aux order; non-bits[non-bits] : Scalar,
//!               in aux order (packed in this order by `begin_witness`)
//! ```
//!
//! # Example
//!
//! ```
//! use shm_protocol::{
//!     current_owner, HugePagePolicy, Region, Ring, RingConfig, SlotCapacity, SlotLengths,
//!     SlotMeta, SlotResult,
//! };
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), shm_protocol::Error> {
//! let caps = SlotCapacity { n: 8, inputs: 2, aux: 5 };
//! let config = RingConfig::uniform(2, caps.slot_bytes().unwrap());
//! let region = Region::create("example-ring", config.region_bytes()?, HugePagePolicy::Auto)?;
//! let ring = Ring::create(region, config)?;
//! let me = current_owner();
//!
//! // producer
//! let mut w = ring.acquire_free(me, 0, Some(Duration::from_secs(1)))?;
//! w.begin(SlotMeta { job_id: 7, partition: 0, ..SlotMeta::default() }, caps)?;
//! let parts = w.parts_mut()?;
//! parts.a[0] = blstrs::Scalar::from(3u64);
//! parts.density_a_aux[0] = 0b101;
//! w.publish(SlotLengths { n: 8, inputs: 2, aux: 5, a_aux_popcount: 2, ..Default::default() })?;
//!
//! // consumer
//! let claimed = ring.claim_ready(me, Some(Duration::from_secs(1)))?;
//! let view = claimed.view()?;
//! assert_eq!(view.a()[0], blstrs::Scalar::from(3u64));
//! claimed.complete(SlotResult::Proof(&[1; 192]))?;
//!
//! // launcher
//! let done = ring.take_next_done(me, Some(Duration::from_secs(1)))?;
//! assert_eq!(done.result()?, SlotResult::Proof(&[1; 192]));
//! assert_eq!(done.free()?.job_id, 7);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
// Under loom only the state machine is exercised; the rest of the crate is unused there.
#![cfg_attr(loom, allow(dead_code))]

#[cfg(not(loom))]
pub mod child;
pub mod control;
mod error;
pub mod fault;
mod state;
mod sync;

#[cfg(not(loom))]
pub mod layout;
mod pages;
mod region;
#[cfg(not(loom))]
pub mod request;
#[cfg(not(loom))]
pub mod ring;
#[cfg(not(loom))]
mod slot;

pub use error::{Error, ErrorKind, FieldProblem, Result, SlotField};
pub use state::{SlotState, StateName, MAX_OWNER};

pub use pages::{HugePagePolicy, PageKind};
pub use region::{pass_to, thp_shmem_available, Region, SealedBytes};
#[cfg(not(loom))]
pub use ring::{
    current_owner, pid_alive, Bitmap, ClaimedSlot, DoneSlot, Published, ReclaimReport,
    ReclaimedSlot, Ring, RingConfig, SlotClass, SlotPartsMut, SlotSnapshot, SlotView, SlotWriter,
    StateCounts, WitnessPartsMut, WitnessView,
};
#[cfg(not(loom))]
pub use slot::{
    check_slot_image, Density, SlotCapacity, SlotKind, SlotLayout, SlotLengths, SlotMeta,
    SlotResult, WitnessCapacity, WitnessLengths, SCALAR_BYTES, WORD_BYTES,
};
