//! Making a stream that another bridge may be making at the same moment ([`make_stream`]):
//! "already made" answers from the server are read as "someone made it", and the stream is
//! then fetched (and its subjects updated) instead.

use super::*;

/// JetStream's "stream name already in use" (another bridge made it first, with another
/// config, such as another order of subjects).
const NAME_IN_USE: jetstream::ErrorCode = jetstream::ErrorCode(10058);
/// JetStream's "subjects overlap with an existing stream": the same stream made by another
/// bridge between our look and our create.
const SUBJECTS_OVERLAP: jetstream::ErrorCode = jetstream::ErrorCode(10065);
/// How many times a create that lost a race looks again for the stream it lost to.
const RACES: u32 = 5;

/// The stream `config` names: fetched if it exists (with `config`'s subjects added where
/// missing), made otherwise.
///
/// Two bridges starting together both find no stream and both create it; the loser gets
/// 10058 or 10065. It looks again, and finds the winner's stream. A 10065 that persists
/// (the subject belongs to a stream of another name) is an error after [`RACES`] looks.
pub(super) async fn make_stream(
    js: &jetstream::Context,
    config: stream::Config,
) -> Result<stream::Stream, (&'static str, BoxError)> {
    let mut races = 0;
    loop {
        match js.get_stream(&config.name).await {
            Ok(stream) => return with_subjects(js, stream, &config.subjects).await,
            Err(error) if !not_found(&error) => {
                return Err(("describe the stream", Box::new(error)))
            }
            Err(_) => {}
        }
        match js.create_stream(config.clone()).await {
            Ok(stream) => return Ok(stream),
            Err(error) if races < RACES && lost_race(&error) => races += 1,
            Err(error) => return Err(("make the stream", Box::new(error))),
        }
    }
}

/// `stream`, its subjects updated to hold `subjects` if they do not.
async fn with_subjects(
    js: &jetstream::Context,
    stream: stream::Stream,
    subjects: &[String],
) -> Result<stream::Stream, (&'static str, BoxError)> {
    let info = stream.cached_info();
    let missing: Vec<String> = subjects
        .iter()
        .filter(|s| !info.config.subjects.contains(s))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(stream);
    }
    let mut config = info.config.clone();
    config.subjects.extend(missing);
    js.update_stream(config)
        .await
        .map_err(|e| ("update the stream", Box::new(e) as BoxError))?;
    Ok(stream)
}

fn not_found(error: &jetstream::context::GetStreamError) -> bool {
    matches!(
        error.kind(),
        jetstream::context::GetStreamErrorKind::JetStream(e)
            if e.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
    )
}

/// Whether a create failed because another bridge made the stream meanwhile.
fn lost_race(error: &jetstream::context::CreateStreamError) -> bool {
    matches!(
        error.kind(),
        jetstream::context::CreateStreamErrorKind::JetStream(e)
            if [NAME_IN_USE, SUBJECTS_OVERLAP].contains(&e.error_code())
    )
}

/// The stream `name`, which must exist and hold `subjects` alone (`StreamOptions::existing`):
/// never made nor changed.
pub(super) async fn existing(
    js: &jetstream::Context,
    topic: &'static str,
    name: &str,
    subjects: &[String],
) -> Result<stream::Stream, Error> {
    match find(js, topic, name).await? {
        Some(stream) => alone(topic, name, subjects, stream),
        None => Err(Error::Stream {
            topic,
            stream: name.to_string(),
            why: format!(
                "there is no such stream, and the options say to use an existing one: make \
                 it with the subjects {subjects:?} alone, or leave out `existing()`"
            ),
        }),
    }
}

/// The stream `name`, if the server has it.
pub(super) async fn find(
    js: &jetstream::Context,
    topic: &'static str,
    name: &str,
) -> Result<Option<stream::Stream>, Error> {
    match js.get_stream(name).await {
        Ok(stream) => Ok(Some(stream)),
        Err(error) if not_found(&error) => Ok(None),
        Err(error) => Err(Error::Server {
            topic,
            what: "describe the stream",
            source: Box::new(error),
        }),
    }
}

/// `stream`, if it holds the topic's `subjects` alone (its subject, and the partitions'
/// of a keyed topic, which it may also hold otherwise): the importer keeps the stream's
/// order, and another subject's messages would look like ones lost on the way (and would
/// not decode).
pub(super) fn alone(
    topic: &'static str,
    name: &str,
    wanted: &[String],
    stream: stream::Stream,
) -> Result<stream::Stream, Error> {
    let subject = &wanted[0];
    let subjects = &stream.cached_info().config.subjects;
    let partitions = partitions_subject(topic);
    let theirs = |s: &String| *s == *subject || *s == partitions;
    let holds_all = wanted.iter().all(|w| subjects.contains(w));
    if !holds_all || !subjects.iter().all(theirs) {
        return Err(Error::Stream {
            topic,
            stream: name.to_string(),
            why: format!(
                "it holds the subjects {subjects:?}; the bridge needs a stream holding \
                 `{subject}` alone (the importer keeps the stream's order, and another \
                 subject's messages would look like ones lost on the way)"
            ),
        });
    }
    Ok(stream)
}
