import Foundation

/// Where credential records live.
///
/// Contract (every implementation, and the shared contract tests, hold to it):
/// - `insert` is atomic: it stores the whole record or nothing, and throws
///   `credential_already_registered` if the ID exists.
/// - `update(_:expectedSignCount:)` is a compare-and-set: it writes only if
///   the stored counter still equals `expectedSignCount`, and says whether it did.
/// - Reads return what the last successful write stored.
public protocol CredentialStore: Sendable {
    func credential(id: [UInt8]) async throws -> CredentialRecord?
    func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord]
    func insert(_ record: CredentialRecord) async throws
    func update(_ record: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool
    /// Removes a credential; returns whether it existed.
    func delete(id: [UInt8]) async throws -> Bool
}

/// Where pending ceremonies wait for their response.
///
/// Contract: `consume` removes and returns the ceremony atomically, so that of
/// two concurrent consumers of one challenge exactly one gets it; `pending`
/// reads without removing. Expiry is judged by the caller with its clock;
/// stores may drop entries past `expiresAt`.
public protocol ChallengeStore: Sendable {
    func insert(_ ceremony: PendingCeremony) async throws
    func pending(challenge: [UInt8]) async throws -> PendingCeremony?
    func consume(challenge: [UInt8]) async throws -> PendingCeremony?
}
