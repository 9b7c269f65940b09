//! The documentation's links lead somewhere: every relative link in README.md and the other
//! Markdown files of the repository names a file that exists, and every anchor (`#x` in the
//! same file or `path.md#x`) names a heading of the target as GitHub slugs it. README.md
//! stays short enough to read (at most 400 lines); deep dives belong in `docs/`.
//!
//! No server is started: this reads files only.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

const README_MAX_LINES: usize = 400;

#[test]
fn readme_is_at_most_400_lines() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, at most {README_MAX_LINES}: move deep dives to docs/"
    );
}

#[test]
fn every_link_in_the_docs_resolves() {
    let root = repo_root();
    let files = markdown_files(&root);
    assert!(
        files.iter().any(|f| f == Path::new("README.md")),
        "README.md not among {files:?}"
    );
    let problems = check(&root, &files);
    assert!(
        problems.is_empty(),
        "broken links in the docs:\n{}",
        problems.join("\n")
    );
}

/// The checker must be able to fail: a missing file and a missing anchor are both reported,
/// and links inside code are not read as links.
#[test]
fn the_checker_reports_broken_files_and_anchors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(
        dir.path().join("README.md"),
        "# Title\n\n## Setup (quick)\n\n## Setup (quick)\n\n\
         [ok](docs/guide.md) [ok](docs/guide.md#the-guide) [ok](#setup-quick-1)\n\
         [missing file](docs/nowhere.md) [missing anchor](docs/guide.md#no-such-heading)\n\
         [missing local anchor](#setup-quick-2) [web](https://example.com/a?b=c#d)\n\
         `[in code](docs/absent-in-code.md)`\n\n\
         ```\n[in a block](docs/absent-in-block.md)\n```\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("docs/guide.md"),
        "The Guide\n=========\n\n[back](../README.md#title) [out](../../outside.md)\n",
    )
    .unwrap();
    let files = vec![PathBuf::from("README.md"), PathBuf::from("docs/guide.md")];
    let problems = check(dir.path(), &files);
    let expected = [
        "README.md: [missing file](docs/nowhere.md): no such file",
        "README.md: [missing anchor](docs/guide.md#no-such-heading): no heading",
        "README.md: [missing local anchor](#setup-quick-2): no heading",
        "docs/guide.md: [out](../../outside.md): outside the repository",
    ];
    for want in expected {
        assert!(
            problems.iter().any(|p| p.starts_with(want)),
            "{want:?} not reported in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}

#[test]
fn slugs_follow_github() {
    let mut seen = BTreeMap::new();
    let mut slug = |h: &str| unique_slug(h, &mut seen);
    assert_eq!(
        slug("Native frames (debug files and debuginfod)"),
        "native-frames-debug-files-and-debuginfod"
    );
    assert_eq!(
        slug("`stackhouse serve` — flags & *roles*"),
        "stackhouse-serve--flags--roles"
    );
    assert_eq!(slug("snake_case and-dash"), "snake_case-and-dash");
    assert_eq!(slug("[Linked](x.md) Title"), "linked-title");
    assert_eq!(slug("Faults"), "faults");
    assert_eq!(slug("Faults"), "faults-1");
    assert_eq!(slug("Faults"), "faults-2");
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Markdown files git knows (tracked, or new and not ignored), relative to `root`, outside
/// `node_modules` and `target`. Without git (a source tarball), every `*.md` under `root`.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let listed = Command::new("git")
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "-z",
            "--",
        ])
        .arg("*.md")
        .current_dir(root)
        .output();
    let mut files: Vec<PathBuf> = match listed {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout)
            .unwrap()
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(PathBuf::from)
            .filter(|f| root.join(f).is_file())
            .collect(),
        _ => {
            let mut found = Vec::new();
            walk(root, root, &mut found);
            found
        }
    };
    files.retain(|f| {
        !f.components()
            .any(|c| c.as_os_str() == "node_modules" || c.as_os_str() == "target")
    });
    files.sort();
    files.dedup();
    files
}

fn walk(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with('.') || name == "node_modules" || name == "target" {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, found);
        } else if name.ends_with(".md") {
            found.push(path.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// Every broken link of `files` (paths relative to `root`), one line each:
/// `<file>: [<text>](<target>): <why>`.
fn check(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut anchors: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for link in links(&text) {
            if let Err(why) = check_link(root, file, &link.target, &mut anchors) {
                problems.push(format!(
                    "{}: [{}]({}): {why}",
                    file.display(),
                    link.text,
                    link.target
                ));
            }
        }
    }
    problems
}

fn check_link(
    root: &Path,
    from: &Path,
    target: &str,
    anchors: &mut BTreeMap<PathBuf, BTreeSet<String>>,
) -> Result<(), String> {
    if target.starts_with("http://") || target.starts_with("https://") {
        // Nothing can be fetched here (no network in CI), so an absolute link is only
        // checked to be a well-formed URL with a host.
        let url = reqwest::Url::parse(target).map_err(|e| format!("not a URL: {e}"))?;
        return match url.host_str() {
            Some(host) if !host.is_empty() => Ok(()),
            _ => Err("URL without a host".into()),
        };
    }
    if target.starts_with("mailto:") {
        return Ok(());
    }
    if has_scheme(target) {
        return Err("unsupported URL scheme".into());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        from.to_path_buf()
    } else {
        let decoded = percent_decode(path);
        let joined = match decoded.strip_prefix('/') {
            // GitHub resolves a leading `/` against the repository root.
            Some(rest) => PathBuf::from(rest),
            None => from.parent().unwrap_or(Path::new("")).join(&decoded),
        };
        normalize(&joined).ok_or("outside the repository")?
    };
    let on_disk = root.join(&resolved);
    if !on_disk.exists() {
        return Err("no such file".into());
    }
    let Some(anchor) = anchor else {
        return Ok(());
    };
    if anchor.is_empty() {
        return Err("empty anchor".into());
    }
    if resolved.extension().is_some_and(|e| e == "md") {
        let known = anchors.entry(resolved.clone()).or_insert_with(|| {
            let text = std::fs::read_to_string(&on_disk).unwrap();
            heading_anchors(&text)
        });
        let wanted = percent_decode(anchor).to_lowercase();
        if known.contains(&wanted) {
            Ok(())
        } else {
            Err(format!(
                "no heading with anchor #{anchor} in {}",
                resolved.display()
            ))
        }
    } else if on_disk.is_file() && is_line_anchor(anchor) {
        Ok(())
    } else {
        Err(format!("anchor #{anchor} into a file that is not Markdown"))
    }
}

fn has_scheme(target: &str) -> bool {
    match target.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// GitHub's line anchors into a source file: `L10` or `L10-L20`.
fn is_line_anchor(anchor: &str) -> bool {
    let line = |s: &str| {
        s.strip_prefix('L')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    match anchor.split_once('-') {
        Some((a, b)) => line(a) && line(b),
        None => line(anchor),
    }
}

/// `a/./b/../c` → `a/c`; `None` when the path climbs above the repository root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Link {
    text: String,
    target: String,
}

/// The inline links `[text](target "title")`, images included, and reference definitions
/// `[label]: target` of a Markdown document, outside fenced code blocks and code spans.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for line in prose_lines(text) {
        let line = without_code_spans(line);
        if let Some(def) = reference_definition(&line) {
            found.push(def);
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let label = link_label(&rest[..at]);
            let after = &rest[at + 2..];
            let Some(end) = closing_paren(after) else {
                break;
            };
            if let Some(label) = label {
                let inner = after[..end].trim();
                let target = inner
                    .strip_prefix('<')
                    .and_then(|t| t.split_once('>'))
                    .map(|(t, _)| t)
                    .unwrap_or_else(|| inner.split_whitespace().next().unwrap_or(""));
                found.push(Link {
                    text: label.to_string(),
                    target: target.to_string(),
                });
            }
            rest = &after[end + 1..];
        }
    }
    found
}

/// The text of the `[...]` that ends right before `](`, with nested brackets balanced.
fn link_label(before: &str) -> Option<&str> {
    let mut depth = 0usize;
    for (i, c) in before.char_indices().rev() {
        match c {
            ']' => depth += 1,
            '[' if depth == 0 => return Some(&before[i + 1..]),
            '[' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Where the `)` closing a link destination is, allowing balanced parentheses inside it.
fn closing_paren(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(i),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn reference_definition(line: &str) -> Option<Link> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (label, rest) = rest.split_once("]:")?;
    if label.is_empty() || label.starts_with('^') {
        return None;
    }
    let target = rest.split_whitespace().next()?;
    let target = target
        .strip_prefix('<')
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(target);
    Some(Link {
        text: label.to_string(),
        target: target.to_string(),
    })
}

/// The lines of a document that are not inside fenced code blocks (``` or ~~~).
fn prose_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (fence, marker) {
            (None, Some(m)) if run >= 3 => fence = Some((m, run)),
            (Some((m, open)), Some(c))
                if c == m && run >= open && trimmed[run * m.len_utf8()..].trim().is_empty() =>
            {
                fence = None;
            }
            (None, _) => lines.push(line),
            (Some(_), _) => {}
        }
    }
    lines
}

/// A line with its code spans (`` `...` ``, any run length) removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let after = &rest[start + ticks..];
        let closing = "`".repeat(ticks);
        match after.find(&closing) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                // An unmatched backtick run is literal text.
                out.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every anchor a document offers: its headings (ATX `# x` and setext `x` over `===`/`---`)
/// slugged as GitHub does, and explicit `<a name="x">` / `id="x"` anchors.
fn heading_anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    let lines = prose_lines(text);
    for (i, line) in lines.iter().enumerate() {
        for attr in ["name=\"", "id=\""] {
            let mut rest = *line;
            while let Some(at) = rest.find(attr) {
                let value = &rest[at + attr.len()..];
                if let Some(end) = value.find('"') {
                    anchors.insert(value[..end].to_lowercase());
                }
                rest = &rest[at + attr.len()..];
            }
        }
        if let Some(heading) = atx_heading(line) {
            anchors.insert(unique_slug(heading, &mut seen));
        } else if let Some(next) = lines.get(i + 1) {
            let underline = next.trim();
            let is_underline = !underline.is_empty()
                && (underline.chars().all(|c| c == '=') || underline.chars().all(|c| c == '-'));
            let is_text = !line.trim().is_empty()
                && atx_heading(line).is_none()
                && !line.starts_with("    ")
                && !line.trim_start().starts_with(['-', '*', '>', '|']);
            if is_underline && is_text {
                anchors.insert(unique_slug(line.trim(), &mut seen));
            }
        }
    }
    anchors
}

fn atx_heading(line: &str) -> Option<&str> {
    let trimmed = line.strip_prefix("   ").unwrap_or(line).trim_start_matches(' ');
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    // A closing sequence of `#`s is not part of the heading.
    let rest = rest.trim();
    let rest = match rest.trim_end_matches('#') {
        stripped if stripped.is_empty() || stripped.ends_with([' ', '\t']) => stripped.trim(),
        _ => rest,
    };
    Some(rest)
}

/// GitHub's anchor for a heading: the rendered text lowercased, every character that is
/// not a letter, digit, space, `-` or `_` removed, spaces turned into `-`; a repeated slug
/// gets `-1`, `-2`, ... in order of appearance.
fn unique_slug(heading: &str, seen: &mut BTreeMap<String, usize>) -> String {
    let base = slug(&rendered_text(heading));
    let count = seen.entry(base.clone()).or_insert(0);
    let anchor = if *count == 0 {
        base
    } else {
        format!("{base}-{count}")
    };
    *count += 1;
    anchor
}

fn slug(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The text a heading renders as: link targets, emphasis markers, code-span backticks and
/// HTML tags dropped (what GitHub slugs).
fn rendered_text(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match (link_label(&rest[..at]), closing_paren(after)) {
            (Some(_), Some(end)) => {
                out.push_str(&rest[..at]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(&rest[..at + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let mut text = String::new();
    let mut in_tag = false;
    for c in out.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            '[' | ']' | '`' | '*' if !in_tag => {}
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}
