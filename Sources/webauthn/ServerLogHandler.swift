import Foundation
import Logging
import Synchronization
import WebAuthnServer
import _WebAuthnEncoding

/// `webauthn serve`'s log lines: swift-log's `StreamLogHandler` on standard error, the same
/// lines, but the logger's metadata is formatted when a line is written, not when it is set.
/// The server sets a request ID on the logger of every request and writes a line for few of
/// them; `StreamLogHandler` formats its whole metadata on every change.
///
/// Lines below `notice` (the request log: one line for every request, a stranger's 404s
/// included) are held to a ``LogBudget`` shared by every copy of the handler; notices and
/// above (the audit trail, warnings, errors) are always written.
struct ServerLogHandler: LogHandler {
    private var stream: StreamLogHandler
    private let budget: LogBudget?
    var metadata: Logger.Metadata = [:]

    /// - Parameter budget: the budget of lines below `notice`; nil: no limit.
    init(label: String, budget: LogBudget?) {
        stream = StreamLogHandler.standardError(label: label)
        self.budget = budget
    }

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
        if event.level < .notice, let budget {
            guard let dropped = budget.admit() else { return }
            if dropped > 0 {
                var summary = event
                summary.level = .warning
                summary.message = "log lines below notice not written (over --log-rate): \(dropped)"
                summary.source = "webauthn"
                summary.metadata = ["log.dropped": .stringConvertible(dropped)]
                stream.log(event: summary)
            }
        }
        // The line's own metadata wins over the logger's, as in `StreamLogHandler`.
        if !metadata.isEmpty { event.metadata = metadata.merging(event.metadata ?? [:]) { _, line in line } }
        if let lineMetadata = event.metadata { event.metadata = Self.bounded(lineMetadata) }
        let message = event.message.description
        if Self.needsEscaping(message) { event.message = "\(Self.escaped(message))" }
        stream.log(event: event)
    }

    /// Whether `text` holds a character that could end or forge a line, or hide or reorder what
    /// is shown (`Unicode.Scalar.isHiddenOrControl`: a C0 or C1 control, DEL, a line separator,
    /// a format character such as a bidirectional control, a default-ignorable code point):
    /// `\u{202e}gro.elpmaxe//:sptth` read as `https://example.org` (red team, sixteenth pass).
    static func needsEscaping(_ text: String) -> Bool {
        text.unicodeScalars.contains(where: \.isHiddenOrControl)
    }

    /// `text` with each such character written as `\u{…}`: messages and metadata quote what
    /// strangers sent (a duplicate JSON member's name, a JWS alg), and a newline in one wrote a
    /// line of its own that read as the server's (red team, tenth pass).
    static func escaped(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar.isHiddenOrControl {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    /// The longest string a metadata value keeps in a line; the rest is cut and counted.
    static let maximumValueLength = 256

    /// Metadata as a stranger may not shape it: a request path without its query (where a
    /// code or token could ride) or the identifier an account route names, and no string value longer than ``maximumValueLength``
    /// characters (a 80 KB path made an 80 KB line).
    static func bounded(_ metadata: Logger.Metadata) -> Logger.Metadata {
        var metadata = metadata
        if let path = metadata["hb.request.path"].flatMap(text) {
            let query = path.firstIndex(of: "?")
            let shown = LoggedPath.withoutIdentifiers(String(path[..<(query ?? path.endIndex)])) + (query == nil ? "" : "?…")
            if shown != path { metadata["hb.request.path"] = .string(shown) }
        }
        for (key, value) in metadata {
            guard var text = text(value) else { continue }
            let long = text.utf8.count > maximumValueLength, breaking = needsEscaping(text)
            guard long || breaking else { continue }
            if long { text = String(text.prefix(maximumValueLength)) + "…(\(text.utf8.count) bytes)" }
            metadata[key] = .string(breaking ? escaped(text) : text)
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

/// The budget of log lines: `rate` a second, with a burst of ten seconds' worth (a token bucket
/// of the server's ``RateLimiter``). Without it a stranger's flood of cheap requests (healthz,
/// 404s: 45,000 a second from one address in the red team's run) wrote 7 MB of request log a
/// second until the disk was full.
final class LogBudget: Sendable {
    private let bucket = RateLimiter(maxTracked: 1)
    /// Lines not written and not yet reported, and when the last report was made.
    private let unreported = Mutex<(count: Int, reported: Date?)>((0, nil))
    let rate: Double

    init(rate: Double) { self.rate = rate }

    /// Takes one line's token: nil when the line must be dropped (it is counted), else the
    /// number of lines dropped not yet reported, at most once a second (then counted from zero
    /// again), so that the warning saying so is one line a second at most (red team: one before
    /// every line let through doubled a flood's log, at warning level); 0 in between.
    func admit(now: Date = Date()) -> Int? {
        guard let refused = bucket.admit("lines", rate: rate, burst: rate * 10, now: now) else { return nil }
        return unreported.withLock { u in
            u.count += refused
            guard u.count > 0, u.reported.map({ now.timeIntervalSince($0) >= 1 }) ?? true else { return 0 }
            defer { u = (0, now) }
            return u.count
        }
    }
}
