//! Content checks run before every write: allow, warn, or block.

use std::fmt;

/// One file about to be written into a skill.
#[derive(Debug, Clone, Copy)]
pub struct PendingFile<'a> {
    /// The skill's name (its directory).
    pub skill: &'a str,
    /// The path inside the skill's directory (`SKILL.md`, `scripts/run.sh`).
    pub path: &'a str,
    /// The bytes that would be written.
    pub data: &'a [u8],
}

/// What a content check decided about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Write it.
    Allow,
    /// Write it, and report the reason with the change.
    Warn(String),
    /// Refuse the whole change, with the reason.
    Block(String),
}

/// A moderation hook consulted before every write. A platform plugs in its
/// own (a malware scanner, a policy engine); [`DefaultContentCheck`] is used
/// otherwise.
pub trait ContentCheck: Send + Sync + fmt::Debug {
    /// Judges one file. Called once per file of a change, before anything
    /// is written; a single [`Verdict::Block`] refuses the change.
    fn check(&self, file: &PendingFile<'_>) -> Verdict;
}

/// The default check: refuses executable binaries (ELF, PE, Mach-O)
/// anywhere in a skill, and warns on scripts (files under `scripts/` or
/// starting with `#!`), which an agent may run.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultContentCheck;

impl ContentCheck for DefaultContentCheck {
    fn check(&self, file: &PendingFile<'_>) -> Verdict {
        if let Some(format) = executable_format(file.data) {
            return Verdict::Block(format!(
                "`{}` is an executable binary ({format}); skills may not carry compiled programs",
                file.path
            ));
        }
        if file.path.starts_with("scripts/") || file.data.starts_with(b"#!") {
            return Verdict::Warn(format!(
                "`{}` is a script an agent may run; review it before enabling the skill",
                file.path
            ));
        }
        Verdict::Allow
    }
}

/// The executable format `data` starts with, if any: ELF, PE (an `MZ`
/// header pointing at a `PE\0\0` signature), or Mach-O in any byte order,
/// 32- or 64-bit, thin or fat. A Java class file shares the fat magic
/// `0xcafebabe`; it is told apart by the field that follows (a fat header's
/// architecture count is small, a class file's version is at least 45).
pub fn executable_format(data: &[u8]) -> Option<&'static str> {
    const MACH_O_THIN: [[u8; 4]; 4] = [
        [0xfe, 0xed, 0xfa, 0xce],
        [0xce, 0xfa, 0xed, 0xfe],
        [0xfe, 0xed, 0xfa, 0xcf],
        [0xcf, 0xfa, 0xed, 0xfe],
    ];
    // Fat (universal) headers, 32- and 64-bit, big-endian as written and
    // byte-swapped.
    const MACH_O_FAT: [[u8; 4]; 4] = [
        [0xca, 0xfe, 0xba, 0xbe],
        [0xca, 0xfe, 0xba, 0xbf],
        [0xbe, 0xba, 0xfe, 0xca],
        [0xbf, 0xba, 0xfe, 0xca],
    ];
    /// Class file versions start at 45 (JDK 1.0); no fat binary holds that
    /// many architectures.
    const FIRST_CLASS_VERSION: u32 = 45;
    if data.starts_with(b"\x7fELF") {
        return Some("ELF");
    }
    let magic = data.get(..4)?;
    if MACH_O_THIN.iter().any(|m| magic == m) {
        return Some("Mach-O");
    }
    if MACH_O_FAT.iter().any(|m| magic == m) {
        let java_class = magic == [0xca, 0xfe, 0xba, 0xbe]
            && data
                .get(4..8)
                .is_some_and(|next| u32::from_be_bytes([next[0], next[1], next[2], next[3]]) >= FIRST_CLASS_VERSION);
        if !java_class {
            return Some("Mach-O");
        }
    }
    if is_portable_executable(data) {
        return Some("PE");
    }
    None
}

/// `MZ`, and the offset at 0x3c pointing at a `PE\0\0` signature, so that
/// text which happens to start with "MZ" is not taken for a program.
fn is_portable_executable(data: &[u8]) -> bool {
    if !data.starts_with(b"MZ") || data.len() < 0x40 {
        return false;
    }
    let offset = u32::from_le_bytes([data[0x3c], data[0x3d], data[0x3e], data[0x3f]]) as usize;
    offset
        .checked_add(4)
        .and_then(|end| data.get(offset..end))
        .is_some_and(|sig| sig == b"PE\0\0")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(path: &str, data: &[u8]) -> Verdict {
        DefaultContentCheck.check(&PendingFile { skill: "s", path, data })
    }

    #[test]
    fn binaries_are_blocked_anywhere() {
        let mut pe = vec![0u8; 0x90];
        pe[..2].copy_from_slice(b"MZ");
        pe[0x3c] = 0x80;
        pe[0x80..0x84].copy_from_slice(b"PE\0\0");
        for (path, data) in [
            ("assets/tool", b"\x7fELF\x02\x01\x01".to_vec()),
            ("references/x.md", vec![0xcf, 0xfa, 0xed, 0xfe, 0, 0]),
            ("assets/fat", vec![0xca, 0xfe, 0xba, 0xbe, 0, 0]),
            ("assets/fat2", vec![0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2, 0, 0]),
            ("assets/fat64", vec![0xca, 0xfe, 0xba, 0xbf, 0, 0, 0, 2]),
            ("assets/fat-swapped", vec![0xbe, 0xba, 0xfe, 0xca, 2, 0, 0, 0]),
            ("assets/fat64-swapped", vec![0xbf, 0xba, 0xfe, 0xca, 2, 0, 0, 0]),
            ("assets/thin32-swapped", vec![0xce, 0xfa, 0xed, 0xfe, 7, 0, 0, 1]),
            ("assets/thin64-big", vec![0xfe, 0xed, 0xfa, 0xcf, 1, 0, 0, 7]),
            ("scripts/setup.exe", pe),
        ] {
            assert!(matches!(verdict(path, &data), Verdict::Block(_)), "{path}");
        }
    }

    #[test]
    fn text_that_looks_like_a_header_is_allowed() {
        assert_eq!(
            verdict("references/mz.md", b"MZ is the DOS header; PE follows."),
            Verdict::Allow
        );
        assert_eq!(
            verdict("references/elf.md", b"ELF binaries start with 0x7f"),
            Verdict::Allow
        );
        assert_eq!(verdict("assets/empty", b""), Verdict::Allow);
        // A Java class file (major version 52) shares the fat magic.
        assert_eq!(
            verdict("assets/Tool.class", &[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52, 0, 10]),
            Verdict::Allow
        );
    }

    #[test]
    fn scripts_warn() {
        assert!(matches!(verdict("scripts/run.py", b"print(1)"), Verdict::Warn(_)));
        assert!(matches!(
            verdict("assets/tool", b"#!/bin/sh\necho hi"),
            Verdict::Warn(_)
        ));
        assert_eq!(verdict("references/a.md", b"# A"), Verdict::Allow);
    }
}
