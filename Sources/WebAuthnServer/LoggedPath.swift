internal import Foundation

/// A request path as the logs may hold it: the request line and every audit event that names a
/// path write it through ``withoutIdentifiers(_:)``.
package enum LoggedPath {
    /// The path segments after which an account route names a passkey or a linked identity (an
    /// Apple ID's subject): `/demo/credentials/<id>`, `/demo/identities/<id>`.
    static let identifyingSegments: Set<String> = ["credentials", "identities"]
    /// The lengths in bytes of a segment that can spell one of them: each letter is one ASCII
    /// byte, or three percent-encoded.
    static let spellingLengths = identifyingSegments.map(\.utf8.count).min()!...(3 * identifyingSegments.map(\.utf8.count).max()!)

    /// `path` with the identifier an account route names written `:id`: the audit event for the
    /// same request gives only its hash, and the request line gave it whole (red team, round 26);
    /// the `throttled` event wrote it whole too (red team, round 27).
    /// Segments are compared as the router might read them (percent-decoded, in any case), and
    /// the identifier is the next non-empty segment, so `//demo/credentials/ID`, `/DEMO/…`,
    /// `/%64emo/…` and `/demo/credentials//ID` are written without it too (re-check of round 26).
    package static func withoutIdentifiers(_ path: String) -> String {
        // One pass over the bytes, and a copy only when something is redacted: a 404 on a path
        // of 40,000 segments cost about 48 ms in a debug build when every segment was decoded
        // and lowercased (re-check of round 27).
        let bytes = path.utf8
        var shown = ""
        var copiedUpTo = bytes.startIndex
        var redactNext = false
        var start = bytes.startIndex
        while true {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
            if start != end {
                if redactNext {
                    shown += Substring(bytes[copiedUpTo..<start])
                    shown += ":id"
                    copiedUpTo = end
                    redactNext = false
                } else if spellingLengths.contains(bytes.distance(from: start, to: end)) {
                    let segment = String(Substring(bytes[start..<end]))
                    redactNext = identifyingSegments.contains((segment.removingPercentEncoding ?? segment).lowercased())
                }
            }
            guard end != bytes.endIndex else { break }
            start = bytes.index(after: end)
        }
        guard copiedUpTo != bytes.startIndex else { return path }
        return shown + Substring(bytes[copiedUpTo...])
    }
}
