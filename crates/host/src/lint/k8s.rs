//! Kubernetes / OpenShift YAML linter (catalogue §11).

use rtgauge_model::CpuSet;

/// `reservedSystemCPUs` of a KubeletConfiguration, if the text is one.
pub fn kubelet_reserved_cpus(text: &str) -> Option<CpuSet> {
    let docs = yaml_rust2::YamlLoader::load_from_str(text).ok()?;
    docs.iter().find_map(|d| {
        d["reservedSystemCPUs"]
            .as_str()
            .and_then(|s| CpuSet::parse(s).ok())
    })
}
