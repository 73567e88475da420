//! What a `session/prompt` may hold (the content this agent advertised),
//! and the title a session's first prompt gives it in `session/list`.

use agent_client_protocol::v1::schema::ContentBlock;

/// Titles are the first prompt cut to this many characters.
const TITLE_CHARS: usize = 80;

/// A prompt must hold at least one block, each of a kind this agent
/// advertised (text or resource link).
pub fn check(prompt: &[ContentBlock]) -> Result<(), String> {
    if prompt.is_empty() {
        return Err("prompt is empty; send at least one content block".into());
    }
    for (index, block) in prompt.iter().enumerate() {
        let kind = match block {
            ContentBlock::Text(_) | ContentBlock::ResourceLink(_) => continue,
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::Resource(_) => "embedded resource",
            _ => "unknown",
        };
        return Err(format!(
            "prompt block {index} is {kind} content, which this agent does not accept (text and resource links only)"
        ));
    }
    Ok(())
}

/// The session's title: its first prompt's text, shortened.
pub fn title_of(prompt: &[ContentBlock]) -> String {
    let text: String = prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            ContentBlock::ResourceLink(link) => Some(link.name.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(TITLE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
