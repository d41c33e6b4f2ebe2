internal import Foundation

/// A request path as the logs may hold it: the request line and every audit event that names a
/// path write it through ``withoutIdentifiers(_:)``.
package enum LoggedPath {
    /// The path segments after which an account route names a passkey or a linked identity (an
    /// Apple ID's subject): `/demo/credentials/<id>`, `/demo/identities/<id>`.
    static let identifyingSegments: Set<String> = ["credentials", "identities"]

    /// `path` with the identifier an account route names written `:id`: the audit event for the
    /// same request gives only its hash, and the request line gave it whole (red team, round 26);
    /// the `throttled` event wrote it whole too (red team, round 27).
    /// Segments are compared as the router might read them (percent-decoded, in any case), and
    /// the identifier is the next non-empty segment, so `//demo/credentials/ID`, `/DEMO/…`,
    /// `/%64emo/…` and `/demo/credentials//ID` are written without it too (re-check of round 26).
    package static func withoutIdentifiers(_ path: String) -> String {
        var segments = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        var redactNext = false
        for i in segments.indices where !segments[i].isEmpty {
            if redactNext {
                segments[i] = ":id"
                redactNext = false
            } else {
                redactNext = identifyingSegments.contains((segments[i].removingPercentEncoding ?? segments[i]).lowercased())
            }
        }
        return segments.joined(separator: "/")
    }
}
