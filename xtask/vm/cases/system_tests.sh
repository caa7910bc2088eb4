# Case 7: railwatch-verbs-backend's tests/system.rs (the backend over the
# system libibverbs, no fake) in the guest, where rxe0 exists.
T=/usr/local/bin/verbs-system-tests
$T --test-threads=1 >test.out 2>&1
say "RC test $?"
emit test test.out
