//! Framework images: `fairground/fw-NAME:<inputs hash>`, built from the
//! framework's folder `FROM` its resolved base with the network off, after
//! the sandboxed compile for Rust frameworks (`rust`).
//!
//! Must not run anything from the framework's folder on the host: the
//! folder is read, hashed and packed, and its code runs only in containers.

use std::collections::HashMap;

use anyhow::Context as _;
use bollard::Docker;
use sha2::{Digest, Sha256};

use super::context::{build, hash_dir, image_labels, BuildRequest, Context};
use super::rust;
use super::{existing, finish_info, short, ImageInfo, ImageKind, ImageOptions};
use crate::framework::{Framework, Prebuild};

/// The Rust build plan of `fw`, when it has a cargo prebuild.
fn rust_plan(fw: &Framework, opts: &ImageOptions) -> anyhow::Result<Option<rust::RustPlan>> {
    match &fw.manifest.prebuild {
        Some(Prebuild::Cargo { bin }) => Ok(Some(rust::RustPlan::new(fw, bin, opts)?)),
        None => Ok(None),
    }
}

/// The hash of everything a framework image is built from: its folder
/// (minus target/), the resolved base tag, and for cargo prebuilds the
/// binary, the toolchain, the flags and the build image.
pub fn framework_inputs_hash(
    fw: &Framework,
    base_tag: &str,
    opts: &ImageOptions,
) -> anyhow::Result<String> {
    inputs_hash(fw, base_tag, rust_plan(fw, opts)?.as_ref())
}

fn inputs_hash(
    fw: &Framework,
    base_tag: &str,
    plan: Option<&rust::RustPlan>,
) -> anyhow::Result<String> {
    let mut h = Sha256::new();
    // v2: Rust frameworks compile in a build container (v1 on the host).
    h.update(b"fairground-framework-v2\0");
    h.update(fw.name().as_bytes());
    h.update([0]);
    h.update(base_tag.as_bytes());
    h.update([0]);
    if let Some(plan) = plan {
        plan.hash_into(&mut h);
    }
    hash_dir(&fw.dir, &mut h)
        .with_context(|| format!("framework {}: cannot read {}", fw.name(), fw.dir.display()))?;
    Ok(hex::encode(h.finalize()))
}

/// The tag [`ensure_framework`] builds `fw` under FROM `base_tag`, known
/// before anything is built: a run resolves its containers' specs with it
/// and builds each framework's image only just before its first server.
pub fn framework_tag(
    fw: &Framework,
    base_tag: &str,
    opts: &ImageOptions,
) -> anyhow::Result<String> {
    Ok(tag_of(fw, &framework_inputs_hash(fw, base_tag, opts)?))
}

fn tag_of(fw: &Framework, hash: &str) -> String {
    format!("fairground/fw-{}:{}", fw.name(), short(hash))
}

/// Build (or reuse) `fairground/fw-NAME:<inputs hash>` FROM `base_tag`
/// (`scratch` or a resolved base image tag).
pub async fn ensure_framework(
    docker: &Docker,
    fw: &Framework,
    base_tag: &str,
    opts: &ImageOptions,
) -> anyhow::Result<ImageInfo> {
    let name = fw.name().to_string();
    let plan = rust_plan(fw, opts)?;
    let hash = inputs_hash(fw, base_tag, plan.as_ref())?;
    let tag = tag_of(fw, &hash);
    let info = |reused| {
        finish_info(
            docker,
            ImageKind::Framework,
            &name,
            &tag,
            &hash,
            reused,
            &opts.run,
        )
    };
    if existing(docker, &tag).await?.is_some() {
        (opts.progress)(&format!("framework {name} {tag}: up to date"));
        return Ok(info(true).await?);
    }
    let log = opts.log_dir.join(format!("fw-{name}.log"));
    let _ = std::fs::remove_file(&log);
    let mut ctx = Context::new();
    if let Some(plan) = &plan {
        let built = rust::build(docker, plan, &tag, opts, &log).await?;
        ctx.add_bytes("app", &built.app, 0o755)?;
        ctx.add_bytes("versions.txt", built.versions.as_bytes(), 0o644)?;
    }
    ctx.add_dir(&fw.dir)
        .with_context(|| format!("framework {name}: packing {}", fw.dir.display()))?;
    (opts.progress)(&format!(
        "framework {name} {tag}: docker build FROM {base_tag} (log: {})",
        log.display()
    ));
    build(
        docker,
        BuildRequest {
            tag: &tag,
            what: &format!("framework {name}"),
            context: ctx.finish()?,
            labels: image_labels(ImageKind::Framework, &name, &hash, &opts.run),
            build_args: HashMap::from([("BASE".to_string(), base_tag.to_string())]),
            log: &log,
            network: "none",
        },
    )
    .await?;
    Ok(info(false).await?)
}
