//! The subset of `sh` syntax the in-memory backend runs: simple commands with quoting
//! (`'...'`, `"..."`, `\`), `$VAR`/`${VAR}`/`$?`/`$0`..`$9`/`$@`/`$#`, assignments,
//! redirections (`>`, `>>`, `<`, `2>`, `2>>`, `>&2`, `2>&1`, `&>`), pipes, `&&`, `||`, `;`,
//! newlines, `&` and `!`. Anything else (`if`, loops, subshells, `$(...)`, globs) is a
//! syntax error that names what is missing, so a test meets it at once instead of a wrong
//! result.

use super::lex::{self, unsupported, Token};
pub(crate) use super::lex::{Part, Redir, Word};

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Simple {
    pub assigns: Vec<(String, Word)>,
    pub words: Vec<Word>,
    pub redirs: Vec<Redir>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pipeline {
    pub negate: bool,
    pub commands: Vec<Simple>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Connector {
    And,
    Or,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AndOr {
    pub first: Pipeline,
    pub rest: Vec<(Connector, Pipeline)>,
    /// Ended by `&`.
    pub background: bool,
}

const UNSUPPORTED_WORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "{", "}",
];

/// Parses a script into its and-or lists, in order.
pub(crate) fn parse(script: &str) -> Result<Vec<AndOr>, String> {
    let tokens = lex::tokenize(script)?;
    let mut lists = Vec::new();
    let mut it = tokens.into_iter().peekable();
    let mut current: Option<AndOr> = None;
    let mut pending: Option<Connector> = None;
    let mut pipeline: Option<Pipeline> = None;
    let mut simple = Simple::default();

    // Closes the simple command being read into the pipeline.
    fn end_simple(pipeline: &mut Option<Pipeline>, simple: &mut Simple) -> Result<(), String> {
        let s = std::mem::take(simple);
        let p = pipeline.get_or_insert(Pipeline {
            negate: false,
            commands: Vec::new(),
        });
        if s.words.is_empty() && s.assigns.is_empty() && s.redirs.is_empty() {
            return Err("syntax error: a command is missing".into());
        }
        p.commands.push(s);
        Ok(())
    }

    loop {
        let tok = it.next();
        match tok {
            Some(Token::Word(w)) => {
                let first = simple.words.is_empty();
                if first && simple.assigns.is_empty() && pipeline_is_fresh(&pipeline) {
                    if let Some(Part::Lit {
                        text,
                        quoted: false,
                    }) = w.first()
                    {
                        if text == "!" && w.len() == 1 {
                            pipeline.get_or_insert(Pipeline {
                                negate: true,
                                commands: Vec::new(),
                            });
                            continue;
                        }
                        if UNSUPPORTED_WORDS.contains(&text.as_str()) && w.len() == 1 {
                            return Err(unsupported(&format!("`{text}`")));
                        }
                    }
                }
                if first {
                    if let Some(assign) = assignment(&w) {
                        simple.assigns.push(assign);
                        continue;
                    }
                }
                simple.words.push(w);
            }
            Some(Token::Redir(r)) => simple.redirs.push(r),
            Some(Token::Pipe) => end_simple(&mut pipeline, &mut simple)?,
            Some(Token::And | Token::Or) | Some(Token::Semi | Token::Amp) | None => {
                let empty = simple == Simple::default() && pipeline.is_none();
                if empty && current.is_none() && pending.is_none() {
                    match tok {
                        None => break,
                        Some(Token::Semi) => continue,
                        _ => return Err("syntax error: an operator without a command".into()),
                    }
                }
                end_simple(&mut pipeline, &mut simple)?;
                let p = pipeline.take().expect("just ended");
                match (current.as_mut(), pending.take()) {
                    (Some(list), Some(c)) => list.rest.push((c, p)),
                    _ => {
                        current = Some(AndOr {
                            first: p,
                            rest: Vec::new(),
                            background: false,
                        })
                    }
                }
                match tok {
                    Some(Token::And) => pending = Some(Connector::And),
                    Some(Token::Or) => pending = Some(Connector::Or),
                    _ => {
                        let mut list = current.take().expect("just set");
                        list.background = tok == Some(Token::Amp);
                        lists.push(list);
                        if tok.is_none() {
                            break;
                        }
                    }
                }
                // A newline may follow `&&`/`||`.
                if pending.is_some() {
                    while it.peek() == Some(&Token::Semi) {
                        it.next();
                    }
                }
            }
        }
    }
    Ok(lists)
}

fn pipeline_is_fresh(p: &Option<Pipeline>) -> bool {
    p.as_ref()
        .is_none_or(|p| p.commands.is_empty() && !p.negate)
}

/// `NAME=value` as an assignment.
fn assignment(w: &Word) -> Option<(String, Word)> {
    let Some(Part::Lit {
        text,
        quoted: false,
    }) = w.first()
    else {
        return None;
    };
    let (name, value) = text.split_once('=')?;
    let valid = name.chars().next()?.is_ascii_alphabetic() || name.starts_with('_');
    if !valid || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let mut rest: Word = vec![Part::Lit {
        text: value.to_owned(),
        quoted: true,
    }];
    rest.extend(w[1..].iter().cloned());
    Some((name.to_owned(), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Word {
        vec![Part::Lit {
            text: s.into(),
            quoted: false,
        }]
    }

    #[test]
    fn lists_pipes_and_redirections_parse() {
        let lists = parse("echo a > f && cat < f | wc -c; echo err >&2 &").unwrap();
        assert_eq!(lists.len(), 2);
        assert_eq!(lists[0].rest.len(), 1);
        assert_eq!(lists[0].rest[0].1.commands.len(), 2);
        assert_eq!(
            lists[0].first.commands[0].redirs,
            [Redir::Out {
                fd: 1,
                target: lit("f"),
                append: false
            }]
        );
        assert!(lists[1].background);
        assert_eq!(
            lists[1].first.commands[0].redirs,
            [Redir::Dup { from: 1, to: 2 }]
        );
    }

    #[test]
    fn quotes_and_variables_make_words() {
        let lists = parse("X=1 echo \"[$HOME]\" 'a b' ''").unwrap();
        let cmd = &lists[0].first.commands[0];
        assert_eq!(cmd.assigns.len(), 1);
        assert_eq!(cmd.words.len(), 4);
        assert!(cmd.words[1].contains(&Part::Var {
            name: "HOME".into(),
            quoted: true
        }));
    }

    #[test]
    fn what_is_not_supported_says_so() {
        for script in ["if true; then :; fi", "echo $(id)", "(cd /)", "ls *.txt"] {
            let e = parse(script).unwrap_err();
            assert!(e.contains("not supported"), "{script}: {e}");
        }
    }
}
