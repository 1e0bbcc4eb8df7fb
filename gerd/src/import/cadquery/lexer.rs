//! The tokenizer: numbers, names, strings, punctuation; comments dropped, lines continued
//! inside brackets.

use super::CqError;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Number(f64),
    Str(String),
    Punct(char),
    Newline,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) line: usize,
}

pub(super) fn tokenize(text: &str) -> Result<Vec<Token>, CqError> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut depth = 0usize;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\n' => {
                // Inside brackets a newline continues the statement, as in Python.
                if depth == 0 {
                    out.push(Token { tok: Tok::Newline, line });
                }
                line += 1;
                i += 1;
            }
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                line += 1;
                i += 2;
            }
            c if c.is_whitespace() => i += 1,
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Token { tok: Tok::Ident(chars[start..i].iter().collect()), line });
            }
            c if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                    let mut j = i + 1;
                    if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                        j += 1;
                    }
                    if j < chars.len() && chars[j].is_ascii_digit() {
                        i = j;
                        while i < chars.len() && chars[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                let text: String = chars[start..i].iter().collect();
                let value = text
                    .parse::<f64>()
                    .map_err(|_| CqError::Syntax { line, message: format!("bad number `{text}`") })?;
                out.push(Token { tok: Tok::Number(value), line });
            }
            '"' | '\'' => {
                let quote = c;
                let start = i + 1;
                i += 1;
                while i < chars.len() && chars[i] != quote && chars[i] != '\n' {
                    i += 1;
                }
                if chars.get(i) != Some(&quote) {
                    return Err(CqError::Syntax { line, message: "unterminated string".into() });
                }
                out.push(Token { tok: Tok::Str(chars[start..i].iter().collect()), line });
                i += 1;
            }
            '(' | '[' => {
                depth += 1;
                out.push(Token { tok: Tok::Punct(c), line });
                i += 1;
            }
            ')' | ']' => {
                depth = depth.saturating_sub(1);
                out.push(Token { tok: Tok::Punct(c), line });
                i += 1;
            }
            ',' | '=' | '.' | '-' | '+' => {
                out.push(Token { tok: Tok::Punct(c), line });
                i += 1;
            }
            other => return Err(CqError::Syntax { line, message: format!("unexpected character `{other}`") }),
        }
    }
    out.push(Token { tok: Tok::Newline, line });
    Ok(out)
}
