//! Where one reconstruction's settings come from, merged in one place: the TOML file of
//! `--config` (or the defaults), then the flags over it, then the environment for what
//! never lives in a file (the API key, the server's URL unless a flag names it, the request
//! slots `run` shares between its jobs).

use anyhow::Result;
use vision2cad::Config;
use vision2cad::vlm::{BackendSpec, CacheMode, ResponseFormat};

use crate::cli::commands::reconstruct::ReconstructArgs;
use crate::cli::env;

/// The backend the flags and the environment name.
pub fn backend(args: &ReconstructArgs) -> BackendSpec {
    BackendSpec {
        kind: args.vlm,
        gt: args.gt.clone(),
        script: args.script.clone(),
        shadow_gt: args.shadow_gt.clone(),
        base_url: args.base_url.clone().or_else(env::base_url),
        api_key: env::api_key(),
        slots: env::vlm_slots(),
    }
}

/// The configuration: the file, the flags over it, checked.
pub fn config(args: &ReconstructArgs) -> Result<Config> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if let Some(p) = &args.prompts {
        anyhow::ensure!(p.is_dir(), "--prompts {} is not a directory", p.display());
        config.prompts = Some(p.clone());
    }
    if let Some(n) = args.max_steps {
        config.max_steps = n;
    }
    if let Some(index) = &args.rag_index {
        config.rag_index = Some(index.clone());
    }
    let vlm = &mut config.vlm;
    if let Some(m) = &args.model {
        vlm.model = m.clone();
    }
    if let Some(f) = &args.response_format {
        vlm.response_format = f.parse::<ResponseFormat>().map_err(anyhow::Error::msg)?;
    }
    if let Some(dir) = &args.cache {
        vlm.cache = Some(dir.clone());
        if args.cache_mode.is_none() && vlm.cache_mode == CacheMode::Off {
            vlm.cache_mode = CacheMode::Write;
        }
    }
    if let Some(m) = &args.cache_mode {
        vlm.cache_mode = m.parse::<CacheMode>().map_err(anyhow::Error::msg)?;
    }
    for assignment in &args.sim {
        config.sim.set(assignment).map_err(anyhow::Error::msg)?;
    }
    if let Some(seed) = args.seed {
        config.sim.seed = seed;
    }
    let ab = &mut config.ablations;
    ab.no_egr |= args.no_egr;
    ab.no_lcb |= args.no_lcb;
    ab.no_pgr |= args.no_pgr;
    ab.no_reg |= args.no_reg;
    ab.no_rag |= args.no_rag;
    ab.no_evf |= args.no_evf;
    // The whole method by default: the default index when none is named (and it is built).
    if config.rag_index.is_none() && !ab.no_rag {
        config.rag_index = crate::cli::commands::default_index::existing();
    }
    config.fit &= !args.no_fit;
    config.fit_steps = (config.fit_steps || args.fit_steps) && !args.no_fit;
    config.fit_subpixel = (config.fit_subpixel || args.subpixel_fit) && !args.no_fit;
    config.check()?;
    Ok(config)
}
