//! Ring settings shared by the command line and the config file.

use shm_protocol::{HugePagePolicy, PageKind};

/// A huge-page setting that is none of `auto`, `1g`, `2m`, `thp`, `none`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("huge pages `{0}` is unknown: use `auto`, `1g`, `2m`, `thp` or `none`")]
pub struct UnknownHugePages(pub String);

/// Parses `auto`, `1g`, `2m`, `thp` or `none`.
pub fn parse_huge_pages(text: &str) -> Result<HugePagePolicy, UnknownHugePages> {
    Ok(match text.trim() {
        "auto" => HugePagePolicy::Auto,
        "1g" => HugePagePolicy::Require(PageKind::Huge1G),
        "2m" => HugePagePolicy::Require(PageKind::Huge2M),
        "thp" => HugePagePolicy::Require(PageKind::Transparent),
        "none" | "plain" => HugePagePolicy::Plain,
        other => return Err(UnknownHugePages(other.to_owned())),
    })
}
