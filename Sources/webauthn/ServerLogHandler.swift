import Logging

/// `webauthn serve`'s log lines: swift-log's `StreamLogHandler` on standard error, the same
/// lines, but the logger's metadata is formatted when a line is written, not when it is set.
/// The server sets a request ID on the logger of every request and writes a line for few of
/// them; `StreamLogHandler` formats its whole metadata on every change.
struct ServerLogHandler: LogHandler {
    private var stream: StreamLogHandler
    var metadata: Logger.Metadata = [:]

    init(label: String) { stream = StreamLogHandler.standardError(label: label) }

    var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        // The line's own metadata wins over the logger's, as in `StreamLogHandler`.
        if !metadata.isEmpty { event.metadata = metadata.merging(event.metadata ?? [:]) { _, line in line } }
        stream.log(event: event)
    }
}
