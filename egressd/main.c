#include <stdio.h>

int
main(void)
{
	printf("egressd %s\n", EGRESSD_VERSION);
	return 0;
}
