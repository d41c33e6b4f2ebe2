internal import Foundation
internal import _WebAuthnEncoding
public import Logging
public import WebAuthnCore

/// Re-audits the stored credentials after each metadata change, in the background:
/// one audit at a time, and a change that arrives during one runs one more audit
/// after it (so the last metadata is always the one audited). Give ``requestAudit()``
/// to ``MetadataService``'s `onInstall`.
public final class CredentialAuditor: Sendable {
    let store: any CredentialAuditing
    let engine: WebAuthnEngine
    let logger: Logger
    let batchSize: Int
    private let state = Locked(State())

    struct State {
        var running = false
        var again = false
        var last: CredentialAudit.Report?
    }

    /// An auditor of `store` against the trust anchors installed in `engine`, at the engine's time.
    public init(store: any CredentialAuditing, engine: WebAuthnEngine, logger: Logger = Logger(label: "webauthn.audit"), batchSize: Int = 500) {
        self.store = store
        self.engine = engine
        self.logger = logger
        self.batchSize = batchSize
    }

    /// The report of the last audit that finished, if any.
    public var lastReport: CredentialAudit.Report? { state.withLock { $0.last } }

    /// Starts an audit now, or once the running one ends.
    public func requestAudit() {
        let start = state.withLock { s -> Bool in
            if s.running {
                s.again = true
                return false
            }
            s.running = true
            return true
        }
        if start { Task { await self.loop() } }
    }

    /// Audits now and returns the report (waits for nothing else; for tests and the CLI).
    @discardableResult
    public func auditNow() async throws(WebAuthnError) -> CredentialAudit.Report {
        let report = try await CredentialAudit.run(
            store: store, anchors: engine.trustAnchors, at: engine.relyingParty.clock.now(), batchSize: batchSize)
        state.withLock { $0.last = report }
        for row in report.unreadable.prefix(20) {
            logger.error(
                "credential audit: a stored credential cannot be read; it was skipped",
                metadata: ["credentialId": .string(Base64URL.encode(row.credentialId)), "reason": .string(row.reason)])
        }
        if !report.flagged.isEmpty || !report.cleared.isEmpty {
            logger.warning(
                "credential audit: flags changed",
                metadata: [
                    "scanned": .stringConvertible(report.scanned), "flagged": .stringConvertible(report.flagged.count),
                    "cleared": .stringConvertible(report.cleared.count), "stillFlagged": .stringConvertible(report.stillFlagged),
                ])
            for entry in report.flagged {
                logger.warning("credential flagged", metadata: ["aaguid": .string(entry.aaguid.description), "reason": .string(entry.flag?.reason ?? "")])
            }
        } else {
            logger.info(
                "credential audit: no change",
                metadata: ["scanned": .stringConvertible(report.scanned), "stillFlagged": .stringConvertible(report.stillFlagged)])
        }
        return report
    }

    private func loop() async {
        while true {
            do { try await auditNow() } catch {
                logger.error("credential audit failed", metadata: ["code": .string(error.code.rawValue), "reason": .string(error.message)])
            }
            let more = state.withLock { s -> Bool in
                if s.again {
                    s.again = false
                    return true
                }
                s.running = false
                return false
            }
            if !more { return }
        }
    }
}
