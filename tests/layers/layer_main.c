/*
 * layer_main: the whole program of a layer check (tests/layers). The
 * library under check is linked whole, so every one of its objects must
 * resolve against that library and the ones below it alone.
 */
int main(void);

int
main(void)
{
	return 0;
}
