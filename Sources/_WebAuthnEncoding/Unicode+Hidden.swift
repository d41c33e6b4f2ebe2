extension Unicode.Scalar {
    /// Whether the scalar shows as nothing, or moves or breaks what is shown around it: a control
    /// (C0, DEL, C1), a format character (Unicode's `Cf`: bidirectional controls, zero-width
    /// characters, tags, ...), a line or paragraph separator, or a default-ignorable code point
    /// (fillers, variation selectors). Everything the project writes where people read it (JSON
    /// output, standard error, log lines, certificate names) escapes these, by this one rule.
    package var isHiddenOrControl: Bool {
        if value < 0x80 { return value < 0x20 || value == 0x7F }
        let properties = self.properties
        switch properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: return true
        default: return properties.isDefaultIgnorableCodePoint
        }
    }
}
