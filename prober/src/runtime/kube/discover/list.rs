//! Reads that scale and that may find nothing: lists page by page, and a 404 (a CRD or API the
//! cluster does not serve) or 403 (a namespace the coordinator may not read) taken as "absent".

use kube::api::{Api, ListParams};

/// Objects per page: big enough that a small cluster needs one request, small enough that a
/// page of nodes on a large one stays a few megabytes.
pub const PAGE: u32 = 500;

/// Every object of a list, following `continue` tokens.
pub async fn all<K>(api: &Api<K>, lp: &ListParams) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut lp = lp.clone().limit(PAGE);
    let mut out = Vec::new();
    loop {
        let page = api.list(&lp).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

/// What a read that may legitimately fail came to.
#[derive(Debug)]
pub enum Found<T> {
    Yes(T),
    /// 404: the API, the CRD or the object does not exist here.
    Absent,
    /// 403: the coordinator's role does not allow it.
    Forbidden,
}

/// Sorts a result into found, absent and forbidden; other errors stay errors.
pub fn found<T>(r: Result<T, kube::Error>) -> Result<Found<T>, kube::Error> {
    match r {
        Ok(v) => Ok(Found::Yes(v)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Found::Absent),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(Found::Forbidden),
        Err(e) => Err(e),
    }
}
