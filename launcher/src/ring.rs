//! Ring settings shared by the commands.

use shm_protocol::{HugePagePolicy, PageKind};

/// Parses `auto`, `1g`, `2m`, `thp` or `none`.
pub fn parse_huge_pages(text: &str) -> anyhow::Result<HugePagePolicy> {
    Ok(match text.trim() {
        "auto" => HugePagePolicy::Auto,
        "1g" => HugePagePolicy::Require(PageKind::Huge1G),
        "2m" => HugePagePolicy::Require(PageKind::Huge2M),
        "thp" => HugePagePolicy::Require(PageKind::Transparent),
        "none" | "plain" => HugePagePolicy::Plain,
        other => anyhow::bail!(
            "huge pages `{other}` is unknown: use `auto`, `1g`, `2m`, `thp` or `none`"
        ),
    })
}
