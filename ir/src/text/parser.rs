//! The parser: recursive descent with one token of lookahead, building the IR directly.
//!
//! It checks what the text alone can tell: syntax, SSA order (a value is defined once, before
//! its uses, parameters first), result-type counts, that `return` matches the signature and
//! that every `call @f` names a function of the module. Calls are resolved after the whole
//! module is read, so a function may be called before it is defined. Shapes and op arity are
//! the verifier's business, not checked here.

use super::lexer::{unescape, Diag, Kind, Lexer, Token};
use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::module::{Binding, Callee, Function, Module, ValueId};
use crate::ops::Op;
use crate::ty::{Shape, TensorType};
use smallvec::SmallVec;
use std::borrow::Cow;

/// How deeply attribute lists and dictionaries may nest, so hostile input cannot overflow
/// the stack.
const MAX_ATTR_DEPTH: usize = 128;

/// Longest token text quoted in an error message.
const MAX_QUOTED: usize = 40;

type Types = SmallVec<[TensorType; 1]>;

pub(super) struct Parser<'a> {
    src: &'a str,
    lex: Lexer<'a>,
    tok: Token,
    attr_depth: usize,
}

impl<'a> Parser<'a> {
    pub fn new(src: &'a str) -> Result<Self, Diag> {
        let mut lex = Lexer::new(src);
        let tok = lex.next_token()?;
        Ok(Parser {
            src,
            lex,
            tok,
            attr_depth: 0,
        })
    }

    // ---- token helpers ----

    fn text(&self, t: Token) -> &'a str {
        &self.src[t.start..t.end]
    }

    fn bump(&mut self) -> Result<Token, Diag> {
        let t = self.tok;
        self.tok = self.lex.next_token()?;
        Ok(t)
    }

    fn at(&self, kind: Kind) -> bool {
        self.tok.kind == kind
    }

    fn at_keyword(&self, kw: &str) -> bool {
        self.tok.kind == Kind::Ident && self.text(self.tok) == kw
    }

    /// `'text'` of the current token, or `end of input`.
    fn found(&self) -> String {
        if self.tok.kind == Kind::Eof {
            return "end of input".to_string();
        }
        let text = self.text(self.tok);
        let mut chars = text.chars();
        // Control characters (raw ones may sit inside strings) are escaped to keep the
        // message on one line.
        let mut shown = String::new();
        for c in chars.by_ref().take(MAX_QUOTED) {
            if c.is_control() {
                shown.extend(c.escape_debug());
            } else {
                shown.push(c);
            }
        }
        let more = if chars.next().is_some() { "..." } else { "" };
        format!("'{shown}{more}'")
    }

    fn expected(&self, what: &str) -> Diag {
        Diag::new(
            self.tok.start,
            format!("expected {what}, found {}", self.found()),
        )
    }

    fn expect(&mut self, kind: Kind, what: &str) -> Result<Token, Diag> {
        if self.at(kind) {
            self.bump()
        } else {
            Err(self.expected(what))
        }
    }

    /// Parses `item` once, then again after each `,`, appending each to `out`.
    fn comma_separated<T>(
        &mut self,
        out: &mut impl Extend<T>,
        mut item: impl FnMut(&mut Self) -> Result<T, Diag>,
    ) -> Result<(), Diag> {
        loop {
            out.extend(Some(item(self)?));
            if !self.at(Kind::Comma) {
                return Ok(());
            }
            self.bump()?;
        }
    }

    /// The name of a `%value` or `@function` token, without its sigil.
    fn name_of(&self, t: Token) -> Cow<'a, str> {
        let body = &self.src[t.start + 1..t.end];
        match body.strip_prefix('"') {
            Some(quoted) => unescape(&quoted[..quoted.len() - 1]),
            None => Cow::Borrowed(body),
        }
    }

    /// The value of a string literal token.
    fn string_of(&self, t: Token) -> Cow<'a, str> {
        unescape(&self.src[t.start + 1..t.end - 1])
    }

    // ---- module and functions ----

    pub fn module(&mut self) -> Result<Module, Diag> {
        if !self.at_keyword("module") {
            return Err(self.expected("'module'"));
        }
        self.bump()?;
        let name = self.expect(Kind::FuncName, "module name '@name' after 'module'")?;
        let mut m = Module::new(self.name_of(name));
        if self.at_keyword("attributes") {
            self.bump()?;
            m.attrs = self.dict()?;
        }
        self.expect(Kind::LBrace, "'{' to open the module body")?;
        let mut calls: Vec<(usize, String)> = Vec::new();
        loop {
            if self.at(Kind::RBrace) {
                self.bump()?;
                break;
            }
            if !self.at_keyword("func") {
                return Err(self.expected("'func' or '}' to close the module"));
            }
            let f = self.function(&m, &mut calls)?;
            m.functions.insert(f.name.clone(), f);
        }
        if !self.at(Kind::Eof) {
            return Err(self.expected("end of input after the module"));
        }
        for (pos, callee) in calls {
            if !m.functions.contains_key(&callee) {
                return Err(Diag::new(
                    pos,
                    format!("call of undefined function '{}'", func_ref(&callee)),
                ));
            }
        }
        Ok(m)
    }

    fn function(&mut self, m: &Module, calls: &mut Vec<(usize, String)>) -> Result<Function, Diag> {
        self.bump()?; // `func`
        if !self.at(Kind::FuncName) {
            return Err(self.expected("function name '@name' after 'func'"));
        }
        let name_tok = self.tok;
        let name = self.name_of(name_tok);
        if m.functions.contains_key(name.as_ref()) {
            return Err(Diag::new(
                name_tok.start,
                format!("redefinition of function '{}'", func_ref(&name)),
            ));
        }
        let mut f = Function::new(name);
        self.bump()?;
        self.expect(Kind::LParen, "'(' after function name")?;
        if !self.at(Kind::RParen) {
            let mut params = Vec::new();
            self.comma_separated(&mut params, |p| {
                let (param_name, pos) = p.new_value_name("parameter name")?;
                p.expect(Kind::Colon, "':' after value name")?;
                let ty = p.ty()?;
                define(&mut f, &param_name, ty, pos)
            })?;
            f.params = params;
        }
        self.expect(Kind::RParen, "',' or ')' after parameter")?;
        self.expect(Kind::Arrow, "'->' after parameter list")?;
        let signature = self.types()?;
        if self.at_keyword("attributes") {
            self.bump()?;
            f.attrs = self.dict()?;
        }
        self.expect(Kind::LBrace, "'{' to open the function body")?;
        loop {
            match self.tok.kind {
                Kind::ValueName => self.binding(&mut f, calls)?,
                Kind::Ident if self.at_keyword("return") => break,
                Kind::Ident => self.binding(&mut f, calls)?,
                _ => return Err(self.expected("binding or 'return'")),
            }
        }
        self.ret(&mut f, &signature)?;
        self.expect(Kind::RBrace, "'}' after return")?;
        Ok(f)
    }

    /// `return %a, %b`, checked against the signature.
    fn ret(&mut self, f: &mut Function, signature: &Types) -> Result<(), Diag> {
        let ret_pos = self.bump()?.start;
        let mut values: SmallVec<[(ValueId, usize); 1]> = SmallVec::new();
        if self.at(Kind::ValueName) {
            self.comma_separated(&mut values, |p| p.use_value(f, "value after ','"))?;
        }
        if values.len() != signature.len() {
            return Err(Diag::new(
                ret_pos,
                format!(
                    "function '{}' returns {} value{} but its signature declares {}",
                    func_ref(&f.name),
                    values.len(),
                    plural(values.len()),
                    signature.len()
                ),
            ));
        }
        for ((v, pos), declared) in values.iter().zip(signature) {
            let ty = f.ty(*v);
            if ty != declared {
                return Err(Diag::new(
                    *pos,
                    format!(
                        "return value '{}' has type {ty} but the signature declares {declared}",
                        value_ref(f.name_of(*v))
                    ),
                ));
            }
        }
        f.results = values.into_iter().map(|(v, _)| v).collect();
        Ok(())
    }

    /// `%r0, %r1 = callee(%a, %b) {attrs} : types`, or without results `callee(...) : ()`.
    fn binding(&mut self, f: &mut Function, calls: &mut Vec<(usize, String)>) -> Result<(), Diag> {
        let mut results: SmallVec<[(Cow<'a, str>, usize); 1]> = SmallVec::new();
        if self.at(Kind::ValueName) {
            self.comma_separated(&mut results, |p| p.new_value_name("value name"))?;
            self.expect(Kind::Equal, "'=' or ',' after result name")?;
        }
        let callee = if self.at_keyword("call") {
            self.bump()?;
            if !self.at(Kind::FuncName) {
                return Err(self.expected("function name '@name' after 'call'"));
            }
            let name = self.name_of(self.tok).into_owned();
            calls.push((self.tok.start, name.clone()));
            self.bump()?;
            Callee::Func(name)
        } else if self.at(Kind::Ident) {
            let name = self.text(self.tok);
            let op = Op::lookup(name)
                .ok_or_else(|| Diag::new(self.tok.start, format!("unknown op '{name}'")))?;
            self.bump()?;
            Callee::Op(op)
        } else {
            return Err(self.expected("op name or 'call'"));
        };
        self.expect(Kind::LParen, "'(' before operands")?;
        let mut operands: SmallVec<[ValueId; 4]> = SmallVec::new();
        if !self.at(Kind::RParen) {
            self.comma_separated(&mut operands, |p| Ok(p.use_value(f, "operand")?.0))?;
        }
        self.expect(Kind::RParen, "',' or ')' after operand")?;
        let attrs = if self.at(Kind::LBrace) {
            self.dict()?
        } else {
            Attrs::new()
        };
        self.expect(Kind::Colon, "':' and result types")?;
        let types_pos = self.tok.start;
        let types = self.types()?;
        if types.len() != results.len() {
            return Err(Diag::new(
                types_pos,
                format!(
                    "binding defines {} value{} but declares {} type{}",
                    results.len(),
                    plural(results.len()),
                    types.len(),
                    plural(types.len())
                ),
            ));
        }
        let results = results
            .into_iter()
            .zip(types)
            .map(|((name, pos), ty)| define(f, &name, ty, pos))
            .collect::<Result<_, _>>()?;
        f.push(Binding {
            results,
            callee,
            operands,
            attrs,
        });
        Ok(())
    }

    /// A `%name` about to be defined (a redefinition is caught when it is defined).
    fn new_value_name(&mut self, what: &str) -> Result<(Cow<'a, str>, usize), Diag> {
        if !self.at(Kind::ValueName) {
            return Err(self.expected(what));
        }
        let t = self.tok;
        self.bump()?;
        Ok((self.name_of(t), t.start))
    }

    /// A `%name` being used: it must be defined already.
    fn use_value(&mut self, f: &Function, what: &str) -> Result<(ValueId, usize), Diag> {
        if !self.at(Kind::ValueName) {
            return Err(self.expected(what));
        }
        let t = self.tok;
        let name = self.name_of(t);
        let id = f.value_by_name(&name).ok_or_else(|| {
            Diag::new(
                t.start,
                format!("use of undefined value '{}'", value_ref(&name)),
            )
        })?;
        self.bump()?;
        Ok((id, t.start))
    }

    // ---- types ----

    /// `T`, `(T, ...)` or `()`.
    fn types(&mut self) -> Result<Types, Diag> {
        let mut types = Types::new();
        if !self.at(Kind::LParen) {
            types.push(self.ty()?);
            return Ok(types);
        }
        self.bump()?;
        if !self.at(Kind::RParen) {
            self.comma_separated(&mut types, |p| p.ty())?;
        }
        self.expect(Kind::RParen, "',' or ')' after type")?;
        Ok(types)
    }

    /// `tensor<1x3xf32>` or `tensor<f32>`.
    fn ty(&mut self) -> Result<TensorType, Diag> {
        if !self.at_keyword("tensor") {
            return Err(self.expected("tensor type"));
        }
        self.bump()?;
        self.expect(Kind::Lt, "'<' after 'tensor'")?;
        if !matches!(self.tok.kind, Kind::Ident | Kind::Num) {
            return Err(self.expected("shape and dtype in tensor type"));
        }
        let body = self.tok;
        let text = self.text(body);
        let mut shape = Shape::new();
        let mut rest = text;
        // Dimensions are `<digits>x`; what follows the last `x` is the dtype.
        while rest.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            let pos = body.start + (text.len() - rest.len());
            let (dim, tail) = rest.split_once('x').ok_or_else(|| {
                Diag::new(
                    pos,
                    format!("expected dtype after dimensions in tensor type, found '{rest}'"),
                )
            })?;
            if !dim.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Diag::new(
                    pos,
                    format!("invalid dimension '{dim}' in tensor type"),
                ));
            }
            let d = dim.parse::<i64>().map_err(|_| {
                Diag::new(
                    pos,
                    format!("dimension '{dim}' out of range in tensor type"),
                )
            })?;
            shape.push(d);
            rest = tail;
        }
        if rest.is_empty() {
            // The body ended right after an `x`, as in `tensor<1x-3xf32>`.
            self.bump()?;
            return Err(self.expected("dtype after 'x' in tensor type"));
        }
        let dtype_pos = body.start + (text.len() - rest.len());
        let dtype = DType::from_short_name(rest)
            .ok_or_else(|| Diag::new(dtype_pos, format!("unknown dtype '{rest}'")))?;
        self.bump()?;
        self.expect(Kind::Gt, "'>' to close tensor type")?;
        Ok(TensorType { shape, dtype })
    }

    // ---- attributes ----

    /// `{key = value, ...}` (the current token is `{`).
    fn dict(&mut self) -> Result<Attrs, Diag> {
        self.expect(Kind::LBrace, "'{' to open attributes")?;
        self.enter_nested()?;
        // Gathered first so the map is allocated once, at its final size.
        let mut entries: SmallVec<[(Cow<'a, str>, Attr, usize); 4]> = SmallVec::new();
        if !self.at(Kind::RBrace) {
            self.comma_separated(&mut entries, |p| {
                let key_tok = p.tok;
                let key = match key_tok.kind {
                    Kind::Ident => Cow::Borrowed(p.text(key_tok)),
                    Kind::Str => p.string_of(key_tok),
                    _ => return Err(p.expected("attribute name")),
                };
                p.bump()?;
                p.expect(Kind::Equal, "'=' after attribute name")?;
                Ok((key, p.attr()?, key_tok.start))
            })?;
        }
        self.expect(Kind::RBrace, "',' or '}' after attribute")?;
        self.attr_depth -= 1;
        let mut attrs = Attrs::with_capacity(entries.len());
        for (key, value, pos) in entries {
            let (index, old) = attrs.insert_full(key.into_owned(), value);
            if old.is_some() {
                let key = attrs.get_index(index).map_or("", |(k, _)| k.as_str());
                return Err(Diag::new(pos, format!("duplicate attribute '{key}'")));
            }
        }
        Ok(attrs)
    }

    fn enter_nested(&mut self) -> Result<(), Diag> {
        self.attr_depth += 1;
        if self.attr_depth > MAX_ATTR_DEPTH {
            return Err(Diag::new(
                self.tok.start,
                format!("attributes nested deeper than {MAX_ATTR_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    fn attr(&mut self) -> Result<Attr, Diag> {
        let t = self.tok;
        let value = match t.kind {
            Kind::Num => number(self.text(t), t.start)?,
            Kind::Str => Attr::Str(self.string_of(t).into_owned()),
            Kind::Ident => match self.text(t) {
                "true" => Attr::Bool(true),
                "false" => Attr::Bool(false),
                "nan" => Attr::Float(f64::NAN),
                "inf" => Attr::Float(f64::INFINITY),
                _ => return Err(self.expected("attribute value")),
            },
            Kind::Minus => {
                self.bump()?;
                if !self.at_keyword("inf") {
                    return Err(self.expected("'inf' after '-'"));
                }
                Attr::Float(f64::NEG_INFINITY)
            }
            Kind::LBracket => return self.list(),
            Kind::LBrace => return self.dict().map(Attr::Dict),
            _ => return Err(self.expected("attribute value")),
        };
        self.bump()?;
        Ok(value)
    }

    /// `[a, b, ...]` (the current token is `[`).
    fn list(&mut self) -> Result<Attr, Diag> {
        self.bump()?;
        self.enter_nested()?;
        let mut items = Vec::new();
        if !self.at(Kind::RBracket) {
            self.comma_separated(&mut items, |p| p.attr())?;
        }
        self.expect(Kind::RBracket, "',' or ']' after list element")?;
        self.attr_depth -= 1;
        Ok(Attr::List(items))
    }
}

/// An int, or a float when the spelling has a `.` or an exponent.
fn number(text: &str, pos: usize) -> Result<Attr, Diag> {
    let invalid = || Diag::new(pos, format!("invalid number '{text}'"));
    if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        // `str::parse` also takes `inf`/`nan` spellings, but a number token starts with a
        // digit; it rounds correctly, so printed floats read back bit-exactly.
        return text.parse::<f64>().map(Attr::Float).map_err(|_| invalid());
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    text.parse::<i64>()
        .map(Attr::Int)
        .map_err(|_| Diag::new(pos, format!("integer '{text}' out of range")))
}

fn define(f: &mut Function, name: &str, ty: TensorType, pos: usize) -> Result<ValueId, Diag> {
    f.new_value_named(name, ty)
        .map_err(|_| Diag::new(pos, format!("redefinition of value '{}'", value_ref(name))))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `%name` as the printer spells it, for messages.
fn value_ref(name: &str) -> String {
    let mut s = String::new();
    let _ = super::printer::write_name(&mut s, '%', name);
    s
}

/// `@name` as the printer spells it, for messages.
fn func_ref(name: &str) -> String {
    let mut s = String::new();
    let _ = super::printer::write_name(&mut s, '@', name);
    s
}
