//! Tar archives for the crate's unit tests: `None` is a directory, `Some(text)` a file.

pub(crate) fn tar_of(entries: &[(&str, Option<&str>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in entries {
        let mut h = tar::Header::new_gnu();
        match data {
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, name, std::io::empty()).unwrap();
            }
            Some(d) => {
                h.set_size(d.len() as u64);
                h.set_mode(0o600);
                b.append_data(&mut h, name, d.as_bytes()).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}
