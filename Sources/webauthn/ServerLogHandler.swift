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
        if let lineMetadata = event.metadata { event.metadata = Self.bounded(lineMetadata) }
        stream.log(event: event)
    }

    /// The longest string a metadata value keeps in a line; the rest is cut and counted.
    static let maximumValueLength = 256

    /// Metadata as a stranger may not shape it: a request path without its query (where a
    /// code or token could ride), and no string value longer than ``maximumValueLength``
    /// characters (a 80 KB path made an 80 KB line).
    static func bounded(_ metadata: Logger.Metadata) -> Logger.Metadata {
        var metadata = metadata
        if let path = metadata["hb.request.path"].flatMap(text), let query = path.firstIndex(of: "?") {
            metadata["hb.request.path"] = .string(String(path[..<query]) + "?…")
        }
        for (key, value) in metadata {
            guard let text = text(value), text.utf8.count > maximumValueLength else { continue }
            metadata[key] = .string(String(text.prefix(maximumValueLength)) + "…(\(text.utf8.count) bytes)")
        }
        return metadata
    }

    /// The text a string value prints (Hummingbird gives the path as a `stringConvertible`).
    private static func text(_ value: Logger.MetadataValue) -> String? {
        switch value {
        case .string(let text): text
        case .stringConvertible(let value): value.description
        default: nil
        }
    }
}
