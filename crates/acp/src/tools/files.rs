//! The file tools: `read_file`, `write_file`, `edit_file`.
//!
//! Every path is confined to the session's directories (`paths.rs`: its
//! `cwd` and `additionalDirectories`), whoever does the reading and writing:
//! - the editor, when it advertises `fs.readTextFile` / `fs.writeTextFile`
//!   (`fs/read_text_file`, `fs/write_text_file`): the agent sees unsaved
//!   buffers, and the editor applies the write;
//! - otherwise the disk.
//!
//! An editor's read error counts as "no such file" (so a write may create
//! the file) only when the editor says so ([`EditorError::is_not_found`]);
//! any other error fails the call with the editor's message.
//!
//! A write or an edit is planned first ([`plan`]: the old text read, the
//! new text computed), so the permission request and the tool call show
//! the diff before anything is written; [`apply`] then writes it.

use std::path::PathBuf;

use agent_client_protocol::v1::schema::{
    ClientCapabilities, ReadTextFileRequest, ToolCallLocation, WriteTextFileRequest,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use serde::Deserialize;
use serde_json::{json, Value};

use super::paths::{confine, Confined, Roots};
use crate::editor::{ask, EditorError};
use crate::model::ToolDefinition;

/// The largest file the tools read or write, in bytes.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// Where one session's files are read and written.
#[derive(Clone)]
pub struct FileAccess {
    /// The session's `cwd` (the base of relative paths) and additional
    /// directories.
    pub roots: Roots,
    pub session_id: String,
    pub cx: ConnectionTo<Client>,
    /// The editor answers `fs/read_text_file`.
    pub editor_reads: bool,
    /// The editor answers `fs/write_text_file`.
    pub editor_writes: bool,
}

impl FileAccess {
    pub fn new(
        cx: ConnectionTo<Client>,
        session_id: &str,
        roots: Roots,
        client: &ClientCapabilities,
    ) -> Self {
        FileAccess {
            roots,
            session_id: session_id.to_owned(),
            cx,
            editor_reads: client.fs.read_text_file,
            editor_writes: client.fs.write_text_file,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileTool {
    Read,
    Write,
    Edit,
}

/// What a file tool call will do, once planned.
#[derive(Debug, Clone, PartialEq)]
pub enum FilePlan {
    /// A read, already done: the text to give the model.
    Read {
        path: PathBuf,
        text: String,
        line: Option<u32>,
    },
    /// A write of `new` over `old` (`None`: a new file).
    Write {
        path: Confined,
        old: Option<String>,
        new: String,
        /// The first line the edit touches (1-based), if known.
        line: Option<u32>,
    },
}

impl FilePlan {
    pub fn location(&self) -> ToolCallLocation {
        match self {
            FilePlan::Read { path, line, .. } => ToolCallLocation::new(path.clone()).line(*line),
            FilePlan::Write { path, line, .. } => {
                ToolCallLocation::new(path.shown.clone()).line(*line)
            }
        }
    }
}

pub fn definitions() -> Vec<ToolDefinition> {
    let path = json!({"type": "string", "description": "A file inside the session's directory: absolute, or relative to it."});
    vec![
        ToolDefinition {
            name: "read_file".into(),
            description: format!(
                "Read a text file (what the editor has open, unsaved changes included). \
                 Optionally from line `line` (1-based) and at most `limit` lines. \
                 Files over {MAX_FILE_BYTES} bytes, directories and binary files are refused."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path,
                    "line": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: "write_file".into(),
            description: "Write a whole text file (creating it and its directories if needed)."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}},
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: "edit_file".into(),
            description: "Edit a text file: replace `old_text` (which must occur exactly once) \
                          with `new_text`, or replace lines `start_line`..=`end_line` (1-based) \
                          with `new_text`."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path,
                    "old_text": {"type": "string"},
                    "new_text": {"type": "string"},
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1}
                },
                "required": ["path", "new_text"],
                "additionalProperties": false
            }),
        },
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    line: Option<u32>,
    limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old_text: Option<String>,
    new_text: String,
    start_line: Option<u32>,
    end_line: Option<u32>,
}

fn arguments<T: serde::de::DeserializeOwned>(arguments: &Value) -> Result<T, String> {
    serde_json::from_value(arguments.clone()).map_err(|error| format!("invalid arguments: {error}"))
}

/// The path a call names, for the tool call's title.
pub fn path_argument(arguments: &Value) -> Option<&str> {
    arguments.get("path").and_then(Value::as_str)
}

/// Plans a call: a read is done here; a write or edit reads the old text
/// and computes the new one.
pub async fn plan(access: &FileAccess, tool: FileTool, args: &Value) -> Result<FilePlan, String> {
    match tool {
        FileTool::Read => {
            let args: ReadArgs = arguments(args)?;
            let path = confine(&access.roots, &args.path)?;
            let text = read(access, &path)
                .await?
                .ok_or_else(|| format!("{} does not exist", path.shown.display()))?;
            Ok(FilePlan::Read {
                text: lines(&text, args.line, args.limit),
                path: path.shown,
                line: args.line,
            })
        }
        FileTool::Write => {
            let args: WriteArgs = arguments(args)?;
            check_size(&args.path, args.content.len())?;
            let path = confine(&access.roots, &args.path)?;
            let old = read(access, &path).await?;
            Ok(FilePlan::Write {
                path,
                old,
                new: args.content,
                line: None,
            })
        }
        FileTool::Edit => {
            let args: EditArgs = arguments(args)?;
            let path = confine(&access.roots, &args.path)?;
            let old = read(access, &path)
                .await?
                .ok_or_else(|| format!("{} does not exist", path.shown.display()))?;
            let (new, line) =
                edit(&old, &args).map_err(|error| format!("{}: {error}", path.shown.display()))?;
            check_size(&args.path, new.len())?;
            Ok(FilePlan::Write {
                path,
                old: Some(old),
                new,
                line: Some(line),
            })
        }
    }
}

/// Writes a planned write or edit.
pub async fn apply(access: &FileAccess, plan: &FilePlan) -> Result<String, String> {
    let FilePlan::Write { path, new, old, .. } = plan else {
        return Ok(String::new());
    };
    if access.editor_writes {
        let request =
            WriteTextFileRequest::new(access.session_id.clone(), path.shown.clone(), new.clone());
        ask(&access.cx, request)
            .await
            .map_err(|error| error.to_string())?;
    } else {
        if let Some(parent) = path.real.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
        }
        if path.real.is_dir() {
            return Err(format!("{} is a directory", path.shown.display()));
        }
        std::fs::write(&path.real, new)
            .map_err(|error| format!("cannot write {}: {error}", path.shown.display()))?;
    }
    Ok(match old {
        None => format!("created {} ({} bytes)", path.shown.display(), new.len()),
        Some(_) => format!("wrote {} ({} bytes)", path.shown.display(), new.len()),
    })
}

fn check_size(path: &str, bytes: usize) -> Result<(), String> {
    if bytes > MAX_FILE_BYTES {
        return Err(format!(
            "{path:?} would be {bytes} bytes; the file tools handle at most {MAX_FILE_BYTES} bytes"
        ));
    }
    Ok(())
}

/// The file's text, `None` if it does not exist. Directories, files over
/// the bound and binary files are errors, whoever reads.
async fn read(access: &FileAccess, path: &Confined) -> Result<Option<String>, String> {
    let shown = path.shown.display();
    let on_disk = match std::fs::metadata(&path.real) {
        Ok(metadata) if metadata.is_dir() => {
            return Err(format!("{shown} is a directory, not a file"))
        }
        Ok(metadata) if metadata.len() > MAX_FILE_BYTES as u64 => {
            return Err(format!(
                "{shown} is {} bytes; the file tools read at most {MAX_FILE_BYTES} bytes",
                metadata.len()
            ))
        }
        Ok(_) => true,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => return Err(format!("cannot read {shown}: {error}")),
    };
    let text = if access.editor_reads {
        // The editor may hold a buffer for a file not saved yet. Only its
        // "not found" makes a file new; any other error (a file it cannot
        // read, an internal failure) is not a licence to overwrite.
        let request = ReadTextFileRequest::new(access.session_id.clone(), path.shown.clone());
        match ask(&access.cx, request).await {
            Ok(answer) => answer.content,
            Err(error) if error.is_not_found() && !on_disk => return Ok(None),
            Err(error) => return Err(read_failed(&shown, &error)),
        }
    } else {
        if !on_disk {
            return Ok(None);
        }
        let bytes =
            std::fs::read(&path.real).map_err(|error| format!("cannot read {shown}: {error}"))?;
        String::from_utf8(bytes).map_err(|_| binary(&shown))?
    };
    if text.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{shown} is {} bytes; the file tools read at most {MAX_FILE_BYTES} bytes",
            text.len()
        ));
    }
    if text.contains('\0') {
        return Err(binary(&shown));
    }
    Ok(Some(text))
}

fn read_failed(shown: &impl std::fmt::Display, error: &EditorError) -> String {
    format!("cannot read {shown} through the editor: {error}")
}

fn binary(shown: &impl std::fmt::Display) -> String {
    format!("{shown} is not a text file (it holds binary data)")
}

/// Lines `line..line+limit` (1-based) of `text`.
fn lines(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_owned();
    }
    let skip = line.unwrap_or(1).saturating_sub(1) as usize;
    let take = limit.map_or(usize::MAX, |limit| limit as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

/// The edited text and the first line it touches.
fn edit(old: &str, args: &EditArgs) -> Result<(String, u32), String> {
    match (&args.old_text, args.start_line, args.end_line) {
        (Some(find), None, None) => {
            if find.is_empty() {
                return Err("old_text is empty".into());
            }
            let count = old.matches(find.as_str()).count();
            match count {
                0 => Err("old_text was not found".into()),
                1 => {
                    let at = old.find(find.as_str()).unwrap_or_default();
                    let line = old[..at].matches('\n').count() as u32 + 1;
                    Ok((old.replacen(find.as_str(), &args.new_text, 1), line))
                }
                n => Err(format!(
                    "old_text occurs {n} times; give enough of the surrounding text to make it unique"
                )),
            }
        }
        (None, Some(start), Some(end)) => {
            let lines: Vec<&str> = old.split_inclusive('\n').collect();
            if start == 0 || end < start || end as usize > lines.len() {
                return Err(format!(
                    "lines {start}..={end} are not a range of this file's {} lines",
                    lines.len()
                ));
            }
            let mut new = lines[..start as usize - 1].concat();
            new.push_str(&args.new_text);
            let replaced_ends_line = lines[end as usize - 1].ends_with('\n');
            if replaced_ends_line && !args.new_text.is_empty() && !args.new_text.ends_with('\n') {
                new.push('\n');
            }
            new.push_str(&lines[end as usize..].concat());
            Ok((new, start))
        }
        _ => Err("give either old_text, or start_line and end_line".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit_args(old_text: Option<&str>, new_text: &str, range: Option<(u32, u32)>) -> EditArgs {
        EditArgs {
            path: "f".into(),
            old_text: old_text.map(str::to_owned),
            new_text: new_text.into(),
            start_line: range.map(|r| r.0),
            end_line: range.map(|r| r.1),
        }
    }

    #[test]
    fn edits_replace_a_unique_string_or_a_range_of_lines() {
        let text = "one\ntwo\nthree\ntwo\n";
        assert_eq!(
            edit(text, &edit_args(Some("three"), "3", None)).unwrap(),
            ("one\ntwo\n3\ntwo\n".into(), 3)
        );
        assert!(edit(text, &edit_args(Some("two"), "2", None))
            .unwrap_err()
            .contains("occurs 2 times"));
        assert_eq!(
            edit(text, &edit_args(Some("four"), "4", None)).unwrap_err(),
            "old_text was not found"
        );
        assert_eq!(
            edit(text, &edit_args(None, "TWO\nTHREE", Some((2, 3)))).unwrap(),
            ("one\nTWO\nTHREE\ntwo\n".into(), 2)
        );
        assert!(edit(text, &edit_args(None, "x", Some((4, 5)))).is_err());
        assert!(edit(text, &edit_args(None, "x", None)).is_err());
        assert_eq!(lines(text, Some(2), Some(2)), "two\nthree\n");
    }
}
