//! Does a URI match a resource template (RFC 6570)? Routing a
//! `resources/read` of a URI no provider lists goes to the first provider
//! (by namespace order) one of whose templates matches it
//! (`docs/reference/tool-calls.md` section 9.6).
//!
//! Matching, not expansion: each expression stands for what its operator
//! could have produced. A simple `{var}` (and `{.var}`, `{;var}`) matches
//! one or more characters up to the next `/`, `?` or `#`; `{+var}` and
//! `{#var}` any text; `{/var}` path segments; `{?var}` and `{&var}` a query
//! part. Literal text matches itself. The matcher backtracks, so a template
//! like `file:///{+path}.txt` matches `file:///a/b.txt`.

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    text: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Expression(Operator),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    /// `{var}`: a value without `/`, `?`, `#`.
    Simple,
    /// `{+var}`: any text, reserved characters included.
    Reserved,
    /// `{#var}`: `#` then any text (or nothing).
    Fragment,
    /// `{.var}`: `.` and a label, repeated (or nothing).
    Label,
    /// `{/var}`: `/` and a segment, repeated (or nothing).
    Path,
    /// `{;var}`: `;` parameters (or nothing).
    PathParameter,
    /// `{?var}`: a query (or nothing).
    Query,
    /// `{&var}`: a query continuation (or nothing).
    QueryContinuation,
}

impl UriTemplate {
    /// Parses `text`; `None` when a brace is not closed.
    pub fn parse(text: &str) -> Option<UriTemplate> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let close = rest[open..].find('}')? + open;
            let expression = &rest[open + 1..close];
            let operator = match expression.chars().next() {
                Some('+') => Operator::Reserved,
                Some('#') => Operator::Fragment,
                Some('.') => Operator::Label,
                Some('/') => Operator::Path,
                Some(';') => Operator::PathParameter,
                Some('?') => Operator::Query,
                Some('&') => Operator::QueryContinuation,
                _ => Operator::Simple,
            };
            parts.push(Part::Expression(operator));
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Some(UriTemplate {
            text: text.to_owned(),
            parts,
        })
    }

    /// The template as listed.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `uri` is one of the URIs this template describes.
    pub fn matches(&self, uri: &str) -> bool {
        matches_from(&self.parts, uri)
    }
}

fn matches_from(parts: &[Part], uri: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(literal) => uri
            .strip_prefix(literal.as_str())
            .is_some_and(|after| matches_from(rest, after)),
        Part::Expression(operator) => {
            // Every split point the operator allows, longest first.
            let ends: Vec<usize> = uri
                .char_indices()
                .map(|(index, _)| index)
                .chain([uri.len()])
                .collect();
            ends.into_iter()
                .rev()
                .filter(|&end| operator.may_produce(&uri[..end]))
                .any(|end| matches_from(rest, &uri[end..]))
        }
    }
}

impl Operator {
    /// Whether an expansion of this operator could be `text`.
    fn may_produce(self, text: &str) -> bool {
        let plain = |text: &str| !text.contains(['/', '?', '#']);
        match self {
            Operator::Simple => !text.is_empty() && plain(text),
            Operator::Reserved => !text.is_empty(),
            Operator::Fragment => text.is_empty() || text.starts_with('#'),
            Operator::Label => text.is_empty() || (text.starts_with('.') && plain(text)),
            Operator::Path => {
                text.is_empty() || (text.starts_with('/') && !text.contains(['?', '#']))
            }
            Operator::PathParameter => text.is_empty() || (text.starts_with(';') && plain(text)),
            Operator::Query => text.is_empty() || (text.starts_with('?') && !text.contains('#')),
            Operator::QueryContinuation => {
                text.is_empty() || (text.starts_with('&') && !text.contains('#'))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(template: &str, uri: &str) -> bool {
        UriTemplate::parse(template).unwrap().matches(uri)
    }

    #[test]
    fn simple_expressions_match_one_segment() {
        assert!(matches(
            "test://static/resource/{id}",
            "test://static/resource/7"
        ));
        assert!(!matches(
            "test://static/resource/{id}",
            "test://static/resource/"
        ));
        assert!(!matches(
            "test://static/resource/{id}",
            "test://static/resource/7/8"
        ));
        assert!(matches("db://{schema}/{table}", "db://public/users"));
        assert!(!matches("db://{schema}/{table}", "db://public"));
        assert!(!matches("other://{id}", "test://1"));
    }

    #[test]
    fn reserved_and_path_expressions_span_segments() {
        assert!(matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(matches("file:///{+path}.txt", "file:///a/b.txt"));
        assert!(!matches("file:///{+path}.txt", "file:///a/b.md"));
        assert!(matches("repo://x{/segments}", "repo://x/a/b"));
        assert!(matches("repo://x{/segments}", "repo://x"));
    }

    #[test]
    fn query_and_fragment_expressions_are_optional() {
        assert!(matches(
            "search://items{?q,limit}",
            "search://items?q=a&limit=2"
        ));
        assert!(matches("search://items{?q,limit}", "search://items"));
        assert!(matches("doc://a{#section}", "doc://a#intro"));
        assert!(!matches("doc://a{#section}", "doc://ab"));
    }

    #[test]
    fn an_unclosed_brace_is_no_template() {
        assert_eq!(UriTemplate::parse("x://{id"), None);
        assert_eq!(
            UriTemplate::parse("x://plain").unwrap().as_str(),
            "x://plain"
        );
        assert!(matches("x://plain", "x://plain"));
    }
}
