package repository

import (
	"fmt"
	"strings"

	"github.com/payd/payd/domain"
)

// sqlStatuses renders statuses as the list a guard's "status IN" holds,
// as in ('open', 'resolving'). Every guarded statement has its statuses
// written into its text this way, once, when the package is loaded, from
// domain's machines; none is bound or spread at run time. Statuses
// are domain's constants; one that is not a plain lower-case name panics
// at start-up, so nothing but a status ever reaches the text.
func sqlStatuses[S ~string](statuses ...S) string {
	if len(statuses) == 0 {
		panic("repository: no statuses for a status guard")
	}
	var b strings.Builder
	b.WriteByte('(')
	for i, s := range statuses {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sqlStatus(s))
	}
	b.WriteByte(')')
	return b.String()
}

// sqlStatus renders one status as an SQL string literal (see sqlStatuses).
func sqlStatus[S ~string](s S) string {
	if s == "" || strings.Trim(string(s), "abcdefghijklmnopqrstuvwxyz_") != "" {
		panic(fmt.Sprintf("repository: %q is not a status", s))
	}
	return "'" + string(s) + "'"
}

// statusGuard is one event of a domain machine rendered for a guarded
// statement: the statuses the event leaves from, as a list for
// "status IN", and the one it sets.
type statusGuard struct{ from, to string }

// guardOf renders event e of machine m.
func guardOf[S ~string, E ~string](m *domain.Machine[S, E], e E) statusGuard {
	return statusGuard{from: sqlStatuses(m.From(e)...), to: sqlStatus(m.To(e))}
}
