//! Words and operators of a script (see `parse.rs` for the subset): quoting is resolved
//! here, variables are kept as parts of words and expanded when their command runs.

/// A piece of a word, expanded when the command runs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Part {
    Lit { text: String, quoted: bool },
    Var { name: String, quoted: bool },
}

pub(crate) type Word = Vec<Part>;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Redir {
    /// `fd>word` or `fd>>word`.
    Out { fd: u32, target: Word, append: bool },
    /// `<word`.
    In { target: Word },
    /// `from>&to`.
    Dup { from: u32, to: u32 },
    /// `&>word`: stdout and stderr to one file.
    Both { target: Word },
}

/// The error for what a script uses that this shell lacks: it names the construct.
pub(super) fn unsupported(what: &str) -> String {
    format!("{what} is not supported by the in-memory backend's shell")
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Token {
    Word(Word),
    Semi,
    Amp,
    And,
    Or,
    Pipe,
    Redir(Redir),
}

pub(super) fn tokenize(s: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            ' ' | '\t' => i += 1,
            '\\' if next == Some('\n') => i += 2,
            '\n' | ';' => {
                out.push(Token::Semi);
                i += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '&' if next == Some('&') => {
                out.push(Token::And);
                i += 2;
            }
            '&' if next == Some('>') => {
                i += 2;
                let target = read_word(&chars, &mut i)?;
                out.push(Token::Redir(Redir::Both { target }));
            }
            '&' => {
                out.push(Token::Amp);
                i += 1;
            }
            '|' if next == Some('|') => {
                out.push(Token::Or);
                i += 2;
            }
            '|' => {
                out.push(Token::Pipe);
                i += 1;
            }
            '(' | ')' => return Err(unsupported("a subshell `( ... )`")),
            '>' | '<' => out.push(Token::Redir(redirection(&chars, &mut i, None)?)),
            d if d.is_ascii_digit() && matches!(next, Some('>' | '<')) => {
                i += 1;
                let fd = d.to_digit(10).expect("a digit");
                out.push(Token::Redir(redirection(&chars, &mut i, Some(fd))?));
            }
            _ => out.push(Token::Word(read_word(&chars, &mut i)?)),
        }
    }
    Ok(out)
}

/// A redirection starting at `chars[*i]` (`>` or `<`), its file descriptor read already.
fn redirection(chars: &[char], i: &mut usize, fd: Option<u32>) -> Result<Redir, String> {
    let c = chars[*i];
    *i += 1;
    if c == '<' {
        return Ok(Redir::In {
            target: read_word(chars, i)?,
        });
    }
    let from = fd.unwrap_or(1);
    if chars.get(*i) == Some(&'&') {
        *i += 1;
        return match chars.get(*i).and_then(|c| c.to_digit(10)) {
            Some(to) => {
                *i += 1;
                Ok(Redir::Dup { from, to })
            }
            None => Err(unsupported("`>&` without a file descriptor")),
        };
    }
    let append = chars.get(*i) == Some(&'>');
    if append {
        *i += 1;
    }
    Ok(Redir::Out {
        fd: from,
        target: read_word(chars, i)?,
        append,
    })
}

/// One word from `chars[*i]`, skipping blanks before it.
fn read_word(chars: &[char], i: &mut usize) -> Result<Word, String> {
    while matches!(chars.get(*i), Some(' ' | '\t')) {
        *i += 1;
    }
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut had_quotes = false;
    let flush = |lit: &mut String, parts: &mut Word, quoted: bool| {
        if !lit.is_empty() {
            parts.push(Part::Lit {
                text: std::mem::take(lit),
                quoted,
            });
        }
    };
    while let Some(&c) = chars.get(*i) {
        match c {
            ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => break,
            '\\' => {
                if let Some(&n) = chars.get(*i + 1) {
                    flush(&mut lit, &mut parts, false);
                    parts.push(Part::Lit {
                        text: n.to_string(),
                        quoted: true,
                    });
                }
                *i += 2;
            }
            '\'' => {
                flush(&mut lit, &mut parts, false);
                had_quotes = true;
                let end = (*i + 1..chars.len())
                    .find(|&j| chars[j] == '\'')
                    .ok_or("syntax error: an unterminated '")?;
                parts.push(Part::Lit {
                    text: chars[*i + 1..end].iter().collect(),
                    quoted: true,
                });
                *i = end + 1;
            }
            '"' => {
                flush(&mut lit, &mut parts, false);
                had_quotes = true;
                *i += 1;
                let mut q = String::new();
                loop {
                    match chars.get(*i) {
                        None => return Err("syntax error: an unterminated \"".into()),
                        Some('"') => break,
                        Some('\\') if matches!(chars.get(*i + 1), Some('$' | '"' | '\\' | '`')) => {
                            q.push(chars[*i + 1]);
                            *i += 2;
                        }
                        Some('$') => {
                            flush(&mut q, &mut parts, true);
                            parts.push(variable(chars, i, true)?);
                        }
                        Some('`') => return Err(unsupported("command substitution")),
                        Some(&c) => {
                            q.push(c);
                            *i += 1;
                        }
                    }
                }
                *i += 1;
                // An empty quoted string is still a word.
                parts.push(Part::Lit {
                    text: q,
                    quoted: true,
                });
            }
            '$' => {
                flush(&mut lit, &mut parts, false);
                parts.push(variable(chars, i, false)?);
            }
            '`' => return Err(unsupported("command substitution")),
            '*' | '?' => return Err(unsupported("a glob pattern")),
            c => {
                lit.push(c);
                *i += 1;
            }
        }
    }
    flush(&mut lit, &mut parts, false);
    if parts.is_empty() && !had_quotes {
        return Err("syntax error: a word is missing".into());
    }
    Ok(parts)
}

/// `$NAME`, `${NAME}`, `$?`, `$#`, `$@`, `$0`..`$9` at `chars[*i]` (the `$`). A `$` before
/// anything else is itself.
fn variable(chars: &[char], i: &mut usize, quoted: bool) -> Result<Part, String> {
    *i += 1;
    let var = |name: String| Part::Var { name, quoted };
    match chars.get(*i) {
        Some('(') => Err(unsupported("command substitution `$(...)`")),
        Some('{') => {
            let end = (*i..chars.len())
                .find(|&j| chars[j] == '}')
                .ok_or("syntax error: an unterminated ${")?;
            let name: String = chars[*i + 1..end].iter().collect();
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(unsupported(&format!("`${{{name}}}`")));
            }
            *i = end + 1;
            Ok(var(name))
        }
        Some(&c) if matches!(c, '?' | '#' | '@') || c.is_ascii_digit() => {
            *i += 1;
            Ok(var(c.to_string()))
        }
        Some(&c) if c.is_ascii_alphabetic() || c == '_' => {
            let start = *i;
            while chars
                .get(*i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                *i += 1;
            }
            Ok(var(chars[start..*i].iter().collect()))
        }
        _ => Ok(Part::Lit {
            text: "$".into(),
            quoted: true,
        }),
    }
}
