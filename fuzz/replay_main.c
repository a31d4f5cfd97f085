/*
 * Replays fuzz corpora without libFuzzer, so every corpus runs as a
 * regression test under gcc (and ASan+UBSan in the sanitizer build).
 * Arguments are files or directories (one level deep).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT (4u << 20)

static int
replay_file(const char *path)
{
	FILE *f;
	uint8_t *buf;
	size_t n;

	if ((f = fopen(path, "rb")) == NULL) {
		fprintf(stderr, "replay: %s: cannot open\n", path);
		return -1;
	}
	if ((buf = malloc(REPLAY_MAX_INPUT)) == NULL) {
		fclose(f);
		return -1;
	}
	n = fread(buf, 1, REPLAY_MAX_INPUT, f);
	fclose(f);
	/* A private copy of exactly n bytes lets ASan see overreads. */
	uint8_t *exact = malloc(n ? n : 1);
	if (exact == NULL) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	return 0;
}

int
main(int argc, char **argv)
{
	int i, count = 0, failed = 0;

	for (i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == -1) {
			fprintf(stderr, "replay: %s: missing\n", argv[i]);
			failed++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed += replay_file(argv[i]) == -1;
			count++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		struct dirent *de;
		if (d == NULL) {
			failed++;
			continue;
		}
		while ((de = readdir(d)) != NULL) {
			char path[4096];
			if (de->d_name[0] == '.')
				continue;
			if ((size_t)snprintf(path, sizeof(path), "%s/%s",
			        argv[i], de->d_name) >= sizeof(path)) {
				failed++;
				continue;
			}
			failed += replay_file(path) == -1;
			count++;
		}
		closedir(d);
	}
	printf("replay: %d inputs, %d failed\n", count, failed);
	if (count == 0) {
		fprintf(stderr, "replay: empty corpus\n");
		return 1;
	}
	return failed ? 1 : 0;
}
