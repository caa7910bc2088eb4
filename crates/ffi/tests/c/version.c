/*
 * version.c: the library's version against the header's. rw_version() is
 * RW_VERSION, rw_version_numbers() gives RW_VERSION_MAJOR, _MINOR and
 * _PATCH, the string is the numbers, and a NULL output is an error.
 */
#include "check.h" /* first: it sets the feature macros */

#include "railwatch.h"

int main(void)
{
	const char *v = rw_version();
	uint32_t major = 99, minor = 99, patch = 99;
	char made[64];

	check(v != NULL && strcmp(v, RW_VERSION) == 0, "string_is_the_headers", "rw_version() is \"%s\", the header says \"%s\"",
	      v ? v : "(null)", RW_VERSION);
	CHECK_OK("numbers", rw_version_numbers(&major, &minor, &patch));
	CHECK_EQ("major_is_the_headers", major, RW_VERSION_MAJOR);
	CHECK_EQ("minor_is_the_headers", minor, RW_VERSION_MINOR);
	CHECK_EQ("patch_is_the_headers", patch, RW_VERSION_PATCH);
	snprintf(made, sizeof made, "%u.%u.%u", (unsigned)major, (unsigned)minor, (unsigned)patch);
	check(v != NULL && strcmp(v, made) == 0, "string_is_the_numbers", "rw_version() is \"%s\", the numbers make \"%s\"",
	      v ? v : "(null)", made);
	check(v == rw_version(), "string_is_static", "two calls gave two strings");

	major = 7;
	CHECK_STATUS("null_minor", rw_version_numbers(&major, NULL, &patch), RW_ERR_NULL);
	CHECK_EQ("nothing_written_on_error", major, 7);
	check(strstr(rw_last_error(), "minor") != NULL, "null_names_the_argument", "last error \"%s\"", rw_last_error());
	CHECK_STATUS("null_major", rw_version_numbers(NULL, &minor, &patch), RW_ERR_NULL);
	return check_done();
}
