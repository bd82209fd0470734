//! Parsing YAML (or JSON, which is YAML) into a typed value, naming the field of the first error.

/// YAML that is not the expected shape: the field serde was in (when it knows), the position in
/// the text and what was expected there.
#[derive(Debug, thiserror::Error)]
#[error("{}{source}", if field.is_empty() || field == "." { String::new() } else { format!("{field}: ") })]
pub struct YamlError {
    /// The field path, e.g. `expect.findings[0]`; `.` or empty at the top.
    pub field: String,
    /// Boxed: the parser's error carries the text around the position and is large.
    pub source: Box<serde_saphyr::Error>,
}

/// Parses YAML (or JSON, which is YAML) into `T`, naming the field of the first error.
pub fn from_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    let mut field = String::new();
    serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            field = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|source| YamlError {
        field,
        source: Box::new(source),
    })
}
