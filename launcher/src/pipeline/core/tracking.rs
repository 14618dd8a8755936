//! Following the children's progress as [`Core`] transitions: timeline events start and end
//! batches and syntheses (the deadlines' clock), charge the jobs' phases, and feed the GPU
//! lines of `status`; the data they fill is in `stats.rs`.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use shm_protocol::control::{EventKind, TimelineEvent};

use super::events::Role;
use super::jobs::Phase;
use super::machine::Core;
use super::stats::{average, Batch, GpuLine, Synthesis};

impl Core {
    /// Follows a child's progress from its timeline events (the deadlines' clock) and charges
    /// the jobs' phases; `now` is when the event arrived.
    pub(crate) fn track(&mut self, role: Role, e: &TimelineEvent, now: Instant) {
        let key = (e.job_id, e.partition);
        let progress = &mut self.progress;
        match e.kind {
            EventKind::GpuClaim => {
                let circuit = self.jobs.circuit_id(e.job_id);
                let circuit_name = self.jobs.circuit(e.job_id).map(str::to_owned);
                let batch = progress.batches.entry(role).or_insert_with(|| Batch {
                    since: now,
                    job: e.job_id,
                    circuit_name,
                    circuit,
                    slots: HashSet::new(),
                    size: 0,
                    start_ns: None,
                });
                batch.slots.insert(key);
            }
            EventKind::GpuStart => {
                if let Some(b) = progress.batches.get_mut(&role) {
                    if b.start_ns.is_none() {
                        b.start_ns = Some(e.t_ns);
                        b.size = b.slots.len().max(1);
                    }
                }
            }
            EventKind::GpuEnd => {
                let Some(b) = progress.batches.get_mut(&role) else {
                    return;
                };
                if let Some(start) = b.start_ns {
                    let share = e.t_ns.saturating_sub(start) / b.size.max(1) as u64;
                    self.jobs
                        .add_time(e.job_id, Phase::Gpu, Duration::from_nanos(share));
                }
                b.slots.remove(&key);
                if !b.slots.is_empty() {
                    return;
                }
                let Some(b) = progress.batches.remove(&role) else {
                    return;
                };
                if let Some(start) = b.start_ns {
                    progress.gpu_devices.entry(role).or_default().busy_ns +=
                        e.t_ns.saturating_sub(start);
                }
                if let (Some(circuit), Some(start)) = (b.circuit, b.start_ns) {
                    let per_slot =
                        Duration::from_nanos(e.t_ns.saturating_sub(start) / b.size.max(1) as u64);
                    average(
                        progress.prove_time.entry(circuit).or_insert(per_slot),
                        per_slot,
                    );
                }
            }
            EventKind::SynthStart => {
                self.jobs.synthesis_started(e.job_id);
                let circuit = self.jobs.circuit_id(e.job_id);
                progress.syntheses.insert(
                    key,
                    Synthesis {
                        since: now,
                        start_ns: e.t_ns,
                        circuit,
                    },
                );
            }
            EventKind::SynthEnd => {
                if let Some(s) = progress.syntheses.remove(&key) {
                    let took = Duration::from_nanos(e.t_ns.saturating_sub(s.start_ns));
                    self.jobs.add_time(e.job_id, Phase::Synthesis, took);
                    if let Some(circuit) = s.circuit {
                        average(progress.synth_time.entry(circuit).or_insert(took), took);
                    }
                }
            }
            _ => {}
        }
    }

    /// One [`GpuLine`] per configured gpu-proc, by ordinal.
    pub(crate) fn gpu_lines(&self) -> Vec<GpuLine> {
        let mut lines: Vec<GpuLine> = self
            .rules
            .gpu_roles
            .iter()
            .map(|&role| {
                let ordinal = match role {
                    Role::Gpu(i) => i,
                    Role::Synth => u32::MAX,
                };
                let device = self.progress.gpu_devices.get(&role);
                let batch = self.progress.batches.get(&role);
                GpuLine {
                    ordinal,
                    role: role.to_string(),
                    name: device.map(|d| d.name.clone()).unwrap_or_default(),
                    vram_total_bytes: device.map_or(0, |d| d.vram_total_bytes),
                    vram_free_bytes: device.map_or(0, |d| d.vram_free_bytes),
                    srs_device_bytes: device.map_or(0, |d| d.srs_device_bytes),
                    planned_device_bytes: device.map_or(0, |d| d.planned_device_bytes),
                    device_budget_bytes: device.map_or(0, |d| d.device_budget_bytes),
                    srs_streamed_bytes: device.map_or(0, |d| d.srs_streamed_bytes),
                    srs_streamed_total_bytes: device.map_or(0, |d| d.srs_streamed_total_bytes),
                    current_job: batch.map(|b| b.job),
                    current_circuit: batch.and_then(|b| b.circuit_name.clone()),
                    busy_ns: device.map_or(0, |d| d.busy_ns),
                }
            })
            .collect();
        lines.sort_by_key(|l| l.ordinal);
        lines
    }
}
