//! The parser: statements (assignments of method chains) and expressions.

use std::fmt;

use super::CqError;
use super::lexer::{Tok, Token, tokenize};

/// An expression of the subset.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Name(String),
    Number(f64),
    Str(String),
    Tuple(Vec<Expr>),
    /// `object.name`.
    Attr(Box<Expr>, String),
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
        kwargs: Vec<(String, Expr)>,
    },
}

/// One statement with its line.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `import cadquery as cq` (the alias).
    Import {
        alias: String,
        line: usize,
    },
    Assign {
        target: String,
        value: Expr,
        line: usize,
    },
    /// A bare expression (e.g. `show_object(solid)`), refused at evaluation.
    Expr {
        value: Expr,
        line: usize,
    },
}

/// Positional and keyword arguments of a call.
type Arguments = (Vec<Expr>, Vec<(String, Expr)>);

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.tokens.get(self.pos).map_or(&Tok::Newline, |t| &t.tok)
    }
    fn line(&self) -> usize {
        self.tokens.get(self.pos).or(self.tokens.last()).map_or(1, |t| t.line)
    }
    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }
    fn error<T>(&self, message: impl Into<String>) -> Result<T, CqError> {
        Err(CqError::Syntax { line: self.line(), message: message.into() })
    }
    fn expect(&mut self, c: char) -> Result<(), CqError> {
        if *self.peek() == Tok::Punct(c) {
            self.pos += 1;
            Ok(())
        } else {
            let found = describe(self.peek());
            self.error(format!("expected `{c}`, found {found}"))
        }
    }

    fn statements(&mut self) -> Result<Vec<Stmt>, CqError> {
        let mut out = Vec::new();
        while self.pos < self.tokens.len() {
            if *self.peek() == Tok::Newline {
                self.pos += 1;
                continue;
            }
            let line = self.line();
            let stmt = match (self.peek().clone(), self.tokens.get(self.pos + 1).map(|t| &t.tok)) {
                (Tok::Ident(kw), _) if kw == "import" => {
                    self.pos += 1;
                    let module = self.ident()?;
                    if module != "cadquery" {
                        return Err(CqError::Unsupported { line, construct: format!("import {module}") });
                    }
                    let alias = if *self.peek() == Tok::Ident("as".into()) {
                        self.pos += 1;
                        self.ident()?
                    } else {
                        module
                    };
                    Stmt::Import { alias, line }
                }
                (Tok::Ident(kw), _) if kw == "from" || kw == "def" || kw == "for" || kw == "if" => {
                    return Err(CqError::Unsupported { line, construct: kw });
                }
                (Tok::Ident(target), Some(Tok::Punct('='))) => {
                    self.pos += 2;
                    Stmt::Assign { target, value: self.expr()?, line }
                }
                _ => Stmt::Expr { value: self.expr()?, line },
            };
            if *self.peek() != Tok::Newline {
                let found = describe(self.peek());
                return self.error(format!("expected the end of the statement, found {found}"));
            }
            out.push(stmt);
        }
        Ok(out)
    }

    fn ident(&mut self) -> Result<String, CqError> {
        match self.next() {
            Tok::Ident(s) => Ok(s),
            other => self.error(format!("expected a name, found {}", describe(&other))),
        }
    }

    fn expr(&mut self) -> Result<Expr, CqError> {
        let mut e = self.primary()?;
        loop {
            match self.peek() {
                Tok::Punct('.') => {
                    self.pos += 1;
                    let name = self.ident()?;
                    e = Expr::Attr(Box::new(e), name);
                }
                Tok::Punct('(') => {
                    self.pos += 1;
                    let (args, kwargs) = self.arguments()?;
                    e = Expr::Call { func: Box::new(e), args, kwargs };
                }
                _ => return Ok(e),
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, CqError> {
        match self.next() {
            Tok::Ident(s) => Ok(Expr::Name(s)),
            Tok::Number(x) => Ok(Expr::Number(x)),
            Tok::Str(s) => Ok(Expr::Str(s)),
            Tok::Punct('-') => match self.primary()? {
                Expr::Number(x) => Ok(Expr::Number(-x)),
                _ => self.error("unary minus applies to numbers only in this subset"),
            },
            Tok::Punct('+') => self.primary(),
            Tok::Punct(open @ ('(' | '[')) => {
                let close = if open == '(' { ')' } else { ']' };
                let mut items = Vec::new();
                let mut trailing_comma = false;
                while *self.peek() != Tok::Punct(close) {
                    items.push(self.expr()?);
                    trailing_comma = false;
                    if *self.peek() == Tok::Punct(',') {
                        self.pos += 1;
                        trailing_comma = true;
                    } else {
                        break;
                    }
                }
                self.expect(close)?;
                if open == '(' && items.len() == 1 && !trailing_comma {
                    return Ok(items.remove(0));
                }
                Ok(Expr::Tuple(items))
            }
            other => self.error(format!("unexpected {}", describe(&other))),
        }
    }

    fn arguments(&mut self) -> Result<Arguments, CqError> {
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        while *self.peek() != Tok::Punct(')') {
            let keyword = match (self.peek(), self.tokens.get(self.pos + 1).map(|t| &t.tok)) {
                (Tok::Ident(k), Some(Tok::Punct('='))) => Some(k.clone()),
                _ => None,
            };
            if let Some(k) = keyword {
                self.pos += 2;
                kwargs.push((k, self.expr()?));
            } else if kwargs.is_empty() {
                args.push(self.expr()?);
            } else {
                return self.error("positional argument after a keyword argument");
            }
            if *self.peek() == Tok::Punct(',') {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.expect(')')?;
        Ok((args, kwargs))
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Number(x) => format!("the number {x}"),
        Tok::Str(s) => format!("the string \"{s}\""),
        Tok::Punct(c) => format!("`{c}`"),
        Tok::Newline => "the end of the line".into(),
    }
}

/// Parse CadQuery text into statements (no evaluation).
pub fn parse_cadquery(code: &str) -> Result<Vec<Stmt>, CqError> {
    Parser { tokens: tokenize(code)?, pos: 0 }.statements()
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Name(n) => f.write_str(n),
            Expr::Number(x) => write!(f, "{x}"),
            Expr::Str(s) => write!(f, "\"{s}\""),
            Expr::Tuple(items) => {
                f.write_str("(")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str(")")
            }
            Expr::Attr(o, n) => write!(f, "{o}.{n}"),
            Expr::Call { func, args, kwargs } => {
                write!(f, "{func}(")?;
                let mut first = true;
                for a in args {
                    if !first {
                        f.write_str(", ")?;
                    }
                    first = false;
                    write!(f, "{a}")?;
                }
                for (k, v) in kwargs {
                    if !first {
                        f.write_str(", ")?;
                    }
                    first = false;
                    write!(f, "{k}={v}")?;
                }
                f.write_str(")")
            }
        }
    }
}
