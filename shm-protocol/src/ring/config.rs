//! The ring's shape: its slot classes ([`RingConfig`], [`SlotClass`]) and the geometry they give.

#[cfg(doc)]
use super::Ring;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::{
    round_up, MAX_SLOTS, MAX_SLOT_CLASSES, RING_HEADER_BYTES, SLOT_ALIGN, SLOT_HEADER_BYTES,
};
#[cfg(doc)]
use crate::region::Region;
#[cfg(doc)]
use crate::slot::SlotCapacity;

/// One size of slot: `slot_count` slots whose data spans are `slot_bytes` each (rounded up to
/// 4096 by the ring).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotClass {
    /// Slots of this size.
    pub slot_count: u32,
    /// Bytes of each slot's data span; size it with [`SlotCapacity::slot_bytes`].
    pub slot_bytes: u64,
}

/// Shape of a ring: its slot classes, one size of slot each (a ring serving circuits of very
/// different sizes gives the small ones small slots, so that a PoSt partition does not take a
/// PoRep-sized slot). A producer asks for the bytes it needs and gets the smallest free slot that
/// fits (see [`Ring::acquire_free`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// The classes, smallest first; `classes[..class_count]` are used.
    classes: [SlotClass; MAX_SLOT_CLASSES],
    class_count: usize,
}

/// Where one class's slots lie: indices `first..first + count`, data spans of `stride` bytes
/// from byte `offset` of the region on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ClassSpan {
    pub(super) first: usize,
    pub(super) count: usize,
    pub(super) stride: u64,
    pub(super) offset: u64,
}

/// A ring's computed geometry: the class spans, where the data area starts, the ring's bytes.
pub(super) struct Geometry {
    pub(super) spans: Vec<ClassSpan>,
    pub(super) data_offset: u64,
    pub(super) total: u64,
}

impl RingConfig {
    /// `slot_count` slots of `slot_bytes` each: one class.
    pub fn uniform(slot_count: u32, slot_bytes: u64) -> RingConfig {
        let mut classes = [SlotClass {
            slot_count: 0,
            slot_bytes: 0,
        }; MAX_SLOT_CLASSES];
        classes[0] = SlotClass {
            slot_count,
            slot_bytes,
        };
        RingConfig {
            classes,
            class_count: 1,
        }
    }

    /// Slots of several sizes. Classes are ordered by size (smallest first), classes whose
    /// rounded sizes are equal are merged, classes of no slots are dropped. Errors: no slot at
    /// all, more than [`MAX_SLOT_CLASSES`] sizes, a size that overflows.
    pub fn with_classes(classes: &[SlotClass]) -> Result<RingConfig> {
        let invalid = |why: String| Error::from(ErrorKind::InvalidConfig(why));
        let mut merged: Vec<SlotClass> = Vec::new();
        for c in classes.iter().filter(|c| c.slot_count > 0) {
            let bytes = round_up(c.slot_bytes.max(1), SLOT_ALIGN)
                .ok_or_else(|| invalid(format!("slot size {} overflows", c.slot_bytes)))?;
            match merged.iter_mut().find(|m| m.slot_bytes == bytes) {
                Some(m) => {
                    m.slot_count = m
                        .slot_count
                        .checked_add(c.slot_count)
                        .ok_or_else(|| invalid("slot count overflows".into()))?
                }
                None => merged.push(SlotClass {
                    slot_count: c.slot_count,
                    slot_bytes: bytes,
                }),
            }
        }
        if merged.is_empty() {
            return Err(invalid("a ring needs at least one slot".into()));
        }
        if merged.len() > MAX_SLOT_CLASSES {
            return Err(invalid(format!(
                "{} slot sizes: a ring has at most {MAX_SLOT_CLASSES}",
                merged.len()
            )));
        }
        merged.sort_by_key(|c| c.slot_bytes);
        Ok(RingConfig::from_classes(&merged))
    }

    /// A config holding `classes` as they are (at most [`MAX_SLOT_CLASSES`]; the callers
    /// order them).
    pub(super) fn from_classes(classes: &[SlotClass]) -> RingConfig {
        let mut out = RingConfig::uniform(0, 0);
        out.classes[..classes.len()].copy_from_slice(classes);
        out.class_count = classes.len();
        out
    }

    /// The classes, smallest first.
    pub fn classes(&self) -> &[SlotClass] {
        &self.classes[..self.class_count]
    }

    /// Slots in all.
    pub fn slot_count(&self) -> u64 {
        self.classes().iter().map(|c| u64::from(c.slot_count)).sum()
    }

    /// Bytes of the largest slots' data spans (as given; the ring rounds them up to 4096).
    pub fn slot_bytes(&self) -> u64 {
        self.classes()
            .iter()
            .map(|c| c.slot_bytes)
            .max()
            .unwrap_or(0)
    }

    /// Bytes of every slot's data span together (rounded as the ring rounds them).
    pub fn data_bytes(&self) -> Result<u64> {
        self.geometry()
            .map(|g| g.spans.iter().map(|c| c.stride * c.count as u64).sum())
    }

    pub(super) fn geometry(&self) -> Result<Geometry> {
        let count = self.slot_count();
        if count == 0 || count > u64::from(MAX_SLOTS) {
            return Err(ErrorKind::InvalidConfig(format!(
                "slot count {count} is not in 1..={MAX_SLOTS}"
            ))
            .into());
        }
        let overflow = || Error::from(ErrorKind::InvalidConfig("ring size overflows".into()));
        let data_offset = RING_HEADER_BYTES as u64 + count * SLOT_HEADER_BYTES as u64;
        let mut spans = Vec::with_capacity(self.class_count);
        let (mut first, mut offset) = (0usize, data_offset);
        for c in self.classes() {
            let stride = round_up(c.slot_bytes.max(1), SLOT_ALIGN).ok_or_else(overflow)?;
            if spans.last().is_some_and(|p: &ClassSpan| p.stride >= stride) {
                return Err(ErrorKind::InvalidConfig(
                    "slot classes must grow strictly in size".into(),
                )
                .into());
            }
            spans.push(ClassSpan {
                first,
                count: c.slot_count as usize,
                stride,
                offset,
            });
            first += c.slot_count as usize;
            offset = stride
                .checked_mul(u64::from(c.slot_count))
                .and_then(|d| d.checked_add(offset))
                .ok_or_else(overflow)?;
        }
        if usize::try_from(offset).is_err() {
            return Err(overflow());
        }
        Ok(Geometry {
            spans,
            data_offset,
            total: offset,
        })
    }

    /// Bytes of region this ring needs: create the [`Region`] with at least this size.
    pub fn region_bytes(&self) -> Result<usize> {
        // `geometry` checked that the total fits a usize.
        self.geometry().map(|g| g.total as usize)
    }
}
