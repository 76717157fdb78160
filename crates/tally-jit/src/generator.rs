//! The compiler of each tier behind one type: the baseline tier's template compiler
//! (`crate::template`, x86-64) and the optimizing levels' Cranelift compiler
//! (`crate::compiler`).

use crate::compiler::{address_names, CraneliftCompiler, ListingParts};
use crate::diagnostics::Diagnostics;
use tally_vm::jit::{CodeGenerator, CompileRequest, Layout, NativeCode, Tier};

/// The compiler of one tier.
pub struct Compiler(Backend);

enum Backend {
    #[cfg(target_arch = "x86_64")]
    Template {
        template: crate::template::TemplateCompiler,
        diagnostics: Diagnostics,
        parts: ListingParts,
    },
    Cranelift(Box<CraneliftCompiler>),
}

impl Compiler {
    /// The baseline tier's compiler; an error on a machine it does not write code for.
    pub fn baseline() -> Result<Compiler, String> {
        Compiler::new(Tier::Baseline)
    }

    /// The optimizing tier's compiler.
    pub fn optimizing() -> Result<Compiler, String> {
        Compiler::new(Tier::Opt)
    }

    /// The compiler of `tier`.
    pub fn new(tier: Tier) -> Result<Compiler, String> {
        if tier == Tier::Baseline {
            #[cfg(target_arch = "x86_64")]
            return Ok(Compiler(Backend::Template {
                template: crate::template::TemplateCompiler::new(),
                diagnostics: Diagnostics::default(),
                parts: ListingParts::ALL,
            }));
            #[cfg(not(target_arch = "x86_64"))]
            return Err("the baseline tier's template compiler writes x86-64 code only".into());
        }
        CraneliftCompiler::new(tier).map(|c| Compiler(Backend::Cranelift(Box::new(c))))
    }

    /// Makes later listings show only `parts` (all by default).
    pub fn set_listing_parts(&mut self, parts: ListingParts) {
        match &mut self.0 {
            #[cfg(target_arch = "x86_64")]
            Backend::Template { parts: p, .. } => *p = parts,
            Backend::Cranelift(c) => c.set_listing_parts(parts),
        }
    }

    /// Makes later compiles (and listings) report what `diagnostics` asks.
    pub fn set_diagnostics(&mut self, diagnostics: Diagnostics) {
        match &mut self.0 {
            #[cfg(target_arch = "x86_64")]
            Backend::Template { diagnostics: d, .. } => *d = diagnostics,
            Backend::Cranelift(c) => c.set_diagnostics(diagnostics),
        }
    }
}

impl CodeGenerator for Compiler {
    fn tier(&self) -> Tier {
        match &self.0 {
            #[cfg(target_arch = "x86_64")]
            Backend::Template { .. } => Tier::Baseline,
            Backend::Cranelift(c) => c.tier(),
        }
    }

    fn compile(&mut self, request: &CompileRequest, layout: &Layout) -> Result<NativeCode, String> {
        match &mut self.0 {
            #[cfg(target_arch = "x86_64")]
            Backend::Template {
                template,
                diagnostics,
                ..
            } => {
                use tally_vm::jit::{EntryPoint, Stage};
                let placed = diagnostics.timed(Stage::Translation, "assemble", || {
                    template.compile(request, layout)
                })?;
                // SAFETY: the template compiler's functions take the `EntryPoint` signature
                // (the platform's C calling convention: vm, frame, bp, resume -> status),
                // and the bytes are in executable memory, whole, before this address is
                // answered.
                let entry = unsafe { std::mem::transmute::<usize, EntryPoint>(placed.start) };
                Ok(NativeCode {
                    shared: placed.shared,
                    entry,
                    size: placed.size,
                    pc_map: placed.pc_map,
                    speculations: 0,
                    safepoints: None,
                    direct: None,
                    code_start: None,
                    osr_entries: Vec::new(),
                    scopes: Vec::new(),
                    never_made: Default::default(),
                })
            }
            Backend::Cranelift(c) => c.compile(request, layout),
        }
    }

    fn listing(&mut self, request: &CompileRequest, layout: &Layout) -> Result<String, String> {
        match &mut self.0 {
            #[cfg(target_arch = "x86_64")]
            Backend::Template {
                template, parts, ..
            } => {
                if !parts.machine {
                    return Ok(
                        "--- baseline: no IR (a template compiler writes each bytecode's \
                               machine code directly; --show=machine lists it)\n"
                            .into(),
                    );
                }
                template.listing(request, layout, &address_names(layout))
            }
            Backend::Cranelift(c) => c.listing(request, layout),
        }
    }
}
